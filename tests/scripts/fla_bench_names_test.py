"""scripts/fla_bench.py without a GPU: its shape parser and the spec names its rows carry (dgps-bench matches FLA's
rows by spec name and shape, bench/Anchors.cpp). At a GVA shape only FLA's GDN op runs, recorded as gdn_gva.

    python3 fla_bench_names_test.py PATH/TO/scripts/fla_bench.py
"""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location('fla_bench', sys.argv[1])
fb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fb)  # torch and FLA are imported only by main()

plain, gva, gva16, dec = fb.parse_shapes('forward:B=8,T=4096,H=16,K=128,V=128;'
                                         'forward:B=1,T=32768,H=2,HV=8,K=128,V=128;'
                                         'forward:B=1,T=32768,H=16,HV=64,K=128,V=128;'
                                         'decode:B=256,H=16,K=128,V=128')
assert plain['HV'] == 16 and gva['HV'] == 8 and gva['H'] == 2 and dec['T'] == 1, (plain, gva, dec)
for op in ('gdn', 'deltanet', 'kda', 'pgdn', 'pkda', 'gated_deltaproduct'):
    assert fb.spec_at(op, plain) == op, op
    assert fb.spec_at(op, dec) == op, op
    want = 'gdn_gva' if op == 'gdn' else None
    assert fb.spec_at(op, gva) == want and fb.spec_at(op, gva16) == want, (op, fb.spec_at(op, gva))
try:
    fb.parse_shapes('forward:B=1,T=0,H=2,K=128,V=128')
    raise AssertionError('T=0 was accepted')
except SystemExit as e:
    assert "bad field 'T=0'" in str(e), e
print('fla_bench: shapes parse; a GVA shape times only GDN, as gdn_gva')
