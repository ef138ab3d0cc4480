//===- TileTypes.td - !tile.tile -------------------------------*- tablegen -*-===//
#ifndef DGPS_DIALECT_TILE_IR_TYPES_TD
#define DGPS_DIALECT_TILE_IR_TYPES_TD

include "dgps/Dialect/Tile/IR/TileDialect.td"

def Tile_TileType : TypeDef<Tile_Dialect, "Tile"> {
  let mnemonic = "tile";
  let summary = "a tile of one CTA: symbolic shape, element type, memory space, layout";
  let description = [{
    `!tile.tile<[K, BV], f32, reg, frag>`. The legal combinations (checked by the verifier):

    | space  | layout | shapes                          | meaning                                   |
    |--------|--------|---------------------------------|-------------------------------------------|
    | global | row    | [K], [V], [K, V] (any dtype)    | a view of a device tensor at the CTA's index |
    | smem   | row    | [K], f32                        | a vector every thread can read             |
    | reg    | split  | [K], f32                        | element d in thread d mod T                |
    | reg    | quad   | [BV], f32                       | 4 adjacent columns per thread              |
    | reg    | frag   | [K, BV], f32                    | a row-group fragment of a K x BV tile      |

    Elements past the true extent (K is padded to 16 on chip) are zero after a load and never stored.
  }];
  let parameters = (ins ArrayRefParameter<"::dgps::tile::Extent">:$dims,
                        "::mlir::Type":$elementType,
                        "::dgps::tile::Space":$space,
                        "::dgps::tile::Layout":$layout);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getDims().size(); }
    bool isReg() const { return getSpace() == ::dgps::tile::Space::reg; }
    /// The same shape and element type in another space / layout.
    TileType with(::dgps::tile::Space space, ::dgps::tile::Layout layout) const;
  }];
}

#endif
