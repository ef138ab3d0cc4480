// Launch decisions the tile IR carries as attributes (Tile.h) and the emitters print: the decode's launch bound
// (tile.min_ctas_per_sm) and the launch features with the hypergradient clamp (tile.launch_features), read from
// the IR rather than decided inside the emitters.
#include "CompilerTestUtil.h"
#include "dgps/Dialect/Tile/IR/Tile.h"
#include "dgps/Emit/TileEmitter.h"
#include "mlir/Parser/Parser.h"

namespace dgps::test {
namespace {

/// The module of a shipped spec after canonicalize and --dgps-lower-decode-to-tile, and its decode function.
struct DecodeIR {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp decode;
};

std::unique_ptr<DecodeIR> lowerDecode(const std::string& name) {
  auto d = std::make_unique<DecodeIR>();
  d->module = ir::importSpec(*d->c.ctx, loadSpec(std::string(DGPS_SPECS_DIR) + "/" + name + ".yaml"));
  EXPECT_TRUE(mlir::succeeded(runPass(*d->c.ctx, *d->module, mlir::createCanonicalizerPass())));
  EXPECT_TRUE(mlir::succeeded(runPass(*d->c.ctx, *d->module, createLowerDecodeToTile())));
  d->decode = d->module->lookupSymbol<mlir::func::FuncOp>(name + "_decode");
  EXPECT_TRUE(d->decode) << name << " has no decode tile function";
  return d;
}

/// The emitted kernel's first line (its signature, launch bound included).
std::string signature(mlir::func::FuncOp fn) {
  mlir::FailureOr<std::string> text = emitTileKernel(fn, "k");
  EXPECT_TRUE(mlir::succeeded(text));
  return mlir::succeeded(text) ? text->substr(0, text->find('\n')) : std::string();
}

TEST(TileDecodeLaunchBound, TheLoweringDecidesItForAKeyHeadCtaOnly) {
  // pgdn: one CTA per key head walks the group's value tiles (reads ahead): bounded per key width.
  auto pgdn = lowerDecode("pgdn");
  auto counts = pgdn->decode->getAttrOfType<mlir::DenseI32ArrayAttr>(tile::kMinCtasPerSmAttr);
  ASSERT_TRUE(counts);
  EXPECT_EQ(std::vector<int32_t>(counts.asArrayRef()), (std::vector<int32_t>{4, 3, 2}));
  // gdn: one CTA per value tile, no bound.
  auto gdn = lowerDecode("gdn");
  EXPECT_FALSE(gdn->decode->hasAttr(tile::kMinCtasPerSmAttr));
  EXPECT_EQ(signature(gdn->decode), "extern \"C\" __global__ void k(dgps::DecodeArgs a) {");
}

TEST(TileDecodeLaunchBound, TheEmitterPrintsTheAttributeItFinds) {
  // Counts unlike the lowering's and unlike each other, so a hard-coded bound or a swapped order shows; a partial
  // last value tile (V not a multiple of the decode's 32-column tile) counts as padded.
  auto pgdn = lowerDecode("pgdn");
  mlir::Builder b(pgdn->c.ctx.get());
  pgdn->decode->setAttr(tile::kMinCtasPerSmAttr, b.getDenseI32ArrayAttr({7, 5, 1}));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*pgdn->module)));
  EXPECT_EQ(signature(pgdn->decode),
            "extern \"C\" __global__ void __launch_bounds__(128, dgps::cfg::KP > 128 ? 1 : dgps::cfg::K < "
            "dgps::cfg::KP || dgps::cfg::V % 32 != 0 ? 5 : 7) k(dgps::DecodeArgs a) {");
  // Without the attribute the same function has no bound.
  pgdn->decode->removeAttr(tile::kMinCtasPerSmAttr);
  EXPECT_EQ(signature(pgdn->decode), "extern \"C\" __global__ void k(dgps::DecodeArgs a) {");
}

TEST(TileDecodeLaunchBound, AMalformedBoundIsRefused) {
  auto pgdn = lowerDecode("pgdn");
  mlir::Builder b(pgdn->c.ctx.get());
  // The verifier names the attribute and the range; the emitter, run on unverified IR, refuses too.
  pgdn->decode->setAttr(tile::kMinCtasPerSmAttr, b.getDenseI32ArrayAttr({4, 0, 2}));
  EXPECT_TRUE(mlir::failed(mlir::verify(*pgdn->module)));
  ASSERT_FALSE(pgdn->c.diagnostics.empty());
  EXPECT_NE(pgdn->c.diagnostics.back().find("tile.min_ctas_per_sm holds 0 CTAs per SM; expected 1 to 16"),
            std::string::npos)
      << pgdn->c.diagnostics.back();
  pgdn->decode->setAttr(tile::kMinCtasPerSmAttr, b.getDenseI32ArrayAttr({4, 3}));
  EXPECT_TRUE(mlir::failed(emitTileKernel(pgdn->decode, "k")));
  EXPECT_NE(pgdn->c.diagnostics.back().find("tile.min_ctas_per_sm must be array<i32: dense, padded, wide>"),
            std::string::npos)
      << pgdn->c.diagnostics.back();
}

/// A clamped OSDN precond_scan (one tile.hypergrad_token_scan, as --dgps-lower-precond-roles-to-tile writes it)
/// with tile.launch_features `features`.
std::string tokenScanModule(const std::string& features) {
  return "func.func @clamped_precond_scan() attributes {tile.grid = \"sequence_key_head_warp\", "
         "tile.launch_features = array<i32: " + features + ">, tile.role = \"precond_scan\"} {\n"
         "  tile.hypergrad_token_scan key \"k\" gain \"beta\" start \"initial_precond_state\" into \"pst\", "
         "\"pcoef\" final \"final_precond_state\" {absent = 1.0 : f32, clamp_max = 2.0 : f32, clamp_min = 0.5 : f32, "
         "eta = 1.0 : f32, l2_eps = 1.0e-6 : f32}\n"
         "  return\n}\n";
}

TEST(TileLaunchFeatures, TheTokenScanPrintsTheClampItsFeaturesCarry) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m =
      mlir::parseSourceString<mlir::ModuleOp>(tokenScanModule("0, 1, 1, 0, 1, 1, 1"), c.ctx.get());
  ASSERT_TRUE(m) << (c.diagnostics.empty() ? "" : c.diagnostics.back());
  auto fn = m->lookupSymbol<mlir::func::FuncOp>("clamped_precond_scan");
  mlir::FailureOr<std::string> text = emitTilePrecondKernel(fn, "k");
  ASSERT_TRUE(mlir::succeeded(text)) << (c.diagnostics.empty() ? "" : c.diagnostics.back());
  // the clamp the features carry reaches the printed scan step (both bounds), and the scan writes the token
  // scan's coefficients into pcoef of the package's printed workspace layout
  for (const char* want : {"st.has_min = true;", "st.lo = 0.5f;", "st.has_max = true;", "st.hi = 2.0f;",
                           "ws + W.pcoef", "t::feedback_token_scan<"})
    EXPECT_NE(text->find(want), std::string::npos) << want << "\n" << *text;
}

TEST(TileLaunchFeatures, ATokenScanWithUnclampedFeaturesIsRefused) {
  // Unclamped features give the workspace the chunked d-scan's regions, which a token scan does not fill: the
  // emitter refuses the disagreement instead of printing a layout the runtime does not allocate.
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m =
      mlir::parseSourceString<mlir::ModuleOp>(tokenScanModule("0, 1, 1, 0, 1, 1, 0"), c.ctx.get());
  ASSERT_TRUE(m);
  auto fn = m->lookupSymbol<mlir::func::FuncOp>("clamped_precond_scan");
  EXPECT_TRUE(mlir::failed(emitTilePrecondKernel(fn, "k")));
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("has a tile.hypergrad_token_scan but tile.launch_features says the "
                                      "hypergrad_ogd scan is unclamped"),
            std::string::npos)
      << c.diagnostics.back();
}

TEST(TileLaunchFeatures, TheVerifierRefusesSixEntries) {
  Context c;
  mlir::OwningOpRef<mlir::ModuleOp> m =
      mlir::parseSourceString<mlir::ModuleOp>(tokenScanModule("0, 1, 1, 0, 1, 1"), c.ctx.get());
  EXPECT_FALSE(m);
  ASSERT_FALSE(c.diagnostics.empty());
  EXPECT_NE(c.diagnostics.back().find("tile.launch_features must be array<i32: decay, gain, precond, side, source, "
                                      "solve, clamp[, write_key]>"),
            std::string::npos)
      << c.diagnostics.back();
}

}  // namespace
}  // namespace dgps::test
