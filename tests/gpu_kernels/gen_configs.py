#!/usr/bin/env python3
"""Writes configs/<name>.cu: hand-checked stand-ins for what the compiler's emitter generates, one per
test configuration of the harness (the contract is in runtime/device/dgps/device/README.md).
Run once after editing the table; the .cu files are committed."""
import os

ROLES_SQUASH = ["precond_summary", "precond_scan", "chunk_local", "state_output"]
ROLES_HYPER = ["precond_scan", "chunk_local", "state_output"]
ROLES_PLAIN = ["chunk_local", "state_output"]

# name: (decay, gain, precond, side, source, solve, extra)
CONFIGS = {
    "gdn":       dict(kDecay=1, kGain=True,  kPrecond=0, kPrecondSide=0, kPrecondSource=0, kSolve=1),
    "deltanet":  dict(kDecay=0, kGain=True,  kPrecond=0, kPrecondSide=0, kPrecondSource=0, kSolve=1),
    "kda":       dict(kDecay=2, kGain=True,  kPrecond=0, kPrecondSide=0, kPrecondSource=0, kSolve=1),
    "pgdn":      dict(kDecay=1, kGain=True,  kPrecond=1, kPrecondSide=0, kPrecondSource=0, kSolve=1),
    "pkda":      dict(kDecay=2, kGain=True,  kPrecond=1, kPrecondSide=0, kPrecondSource=0, kSolve=1),
    "osdn":      dict(kDecay=0, kGain=True,  kPrecond=1, kPrecondSide=0, kPrecondSource=1, kSolve=1,
                      kRetention=True, kTiming=0, kEta=1.0),
    "osdn_post": dict(kDecay=1, kGain=True,  kPrecond=1, kPrecondSide=0, kPrecondSource=1, kSolve=1,
                      kRetention=False, kTiming=1, kEta=0.5, kClampMin=True, kClampMinV=0.25,
                      kClampMax=True, kClampMaxV=2.0),
    "la":        dict(kDecay=0, kGain=False, kPrecond=0, kPrecondSide=0, kPrecondSource=0, kSolve=0),
    "mamba2":    dict(kDecay=1, kGain=True,  kPrecond=0, kPrecondSide=0, kPrecondSource=0, kSolve=0),
    "atq":       dict(kDecay=1, kGain=True,  kPrecond=1, kPrecondSide=1, kPrecondSource=0, kSolve=1,
                      kSquashX=2.0),
}

DEFAULTS = dict(kL2Norm=True, kL2Eps=1e-6, kSquashX=1.5, kSquashEps=1e-6, kSquashGate=True, kSquashGain=True,
                kEta=1.0, kRetention=False, kTiming=0, kInit=1.0, kClampMin=False, kClampMax=False,
                kClampMinV=0.0, kClampMaxV=0.0)

def lit(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) + "f"
    return str(v)

def typ(v):
    return "bool" if isinstance(v, bool) else "float" if isinstance(v, float) else "int"

def write(name, c):
    t = dict(DEFAULTS)
    t.update(c)
    roles = ROLES_PLAIN if t["kPrecond"] == 0 else (ROLES_SQUASH if t["kPrecondSource"] == 0 else ROLES_HYPER)
    lines = ['// Test stand-in for emitter output (tests/gpu_kernels/gen_configs.py): spec "%s".' % name,
             '#include "dgps/device/dgps.cuh"', "namespace {", "struct Traits {"]
    for k, v in t.items():
        lines.append("  static constexpr %s %s = %s;" % (typ(v), k, lit(v)))
    lines += ["};", "}  // namespace"]
    for r in roles:
        lines.append('extern "C" __global__ void dgps_%s_fwd_%s(dgps::ForwardArgs a) { dgps::fwd_%s<Traits>(a); }'
                     % (name, r, r))
    lines.append('extern "C" __global__ void dgps_%s_decode(dgps::DecodeArgs a) { dgps::decode<Traits>(a); }' % name)
    os.makedirs("configs", exist_ok=True)
    with open(os.path.join("configs", name + ".cu"), "w") as f:
        f.write("\n".join(lines) + "\n")

if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    for n, c in CONFIGS.items():
        write(n, c)
