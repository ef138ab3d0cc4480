# dgps-bench under a fake CUDA driver (tests/fake_cuda): checks the host-side paths that would
# otherwise first run on the GPU machine. Run by ctest (bench.fake_gpu) with
#   -DEXE=dgps-bench -DFAKE_DIR=<folder of the fake libcuda.so.1> -DGENERATED=<generated/> -DWORK=<scratch>
# $ENV{DGPS_GENERATED_DIR}, when set, replaces GENERATED.
if(DEFINED ENV{DGPS_GENERATED_DIR} AND NOT "$ENV{DGPS_GENERATED_DIR}" STREQUAL "")
  set(GENERATED "$ENV{DGPS_GENERATED_DIR}")
endif()
if(NOT EXISTS "${GENERATED}/gdn/manifest.yaml")
  message("dgps-bench fake-GPU test: skipped (no ${GENERATED}/gdn package yet)")
  return()
endif()
file(REMOVE_RECURSE "${WORK}/logs")
file(MAKE_DIRECTORY "${WORK}")
set(common --dgps_generated_dir=${GENERATED} --dgps_packages=gdn "--benchmark_filter=B8_T4096|B256"
           --dgps_reps=3 --dgps_decode_reps=3 --dgps_warmup=1 --dgps_jobs=2)
set(env LD_LIBRARY_PATH=${FAKE_DIR} DGPS_CACHE_DIR=${WORK}/cache DGPS_TUNING_DB=${WORK}/tuning.jsonl)

# A tuning-database record for the fake GPU at B8_T4096 (block_v 32, so it differs from every default).
file(READ "${GENERATED}/gdn/manifest.yaml" manifest)
string(REGEX MATCH "spec_hash: \"([0-9a-f]+)\"" _ "${manifest}")
set(hash "${CMAKE_MATCH_1}")
function(write_db codegen)
  file(WRITE "${WORK}/tuning.jsonl"
    "{\"version\":1,\"fingerprint\":{\"name\":\"Fake H200 (dgps-bench test driver)\",\"compute_capability\":\"9.0a\","
    "\"sm_count\":132,\"driver_version\":\"13.0\",\"nvrtc_version\":\"${NVRTC}\",\"codegen_version\":\"${codegen}\","
    "\"smem_per_block_optin\":232448,\"smem_per_sm\":233472,\"regs_per_sm\":65536,\"max_threads_per_block\":1024,"
    "\"l2_bytes\":4194304},\"key\":{\"spec\":\"${hash}\",\"K\":128,\"V\":128,\"H\":16,\"HV\":16,"
    "\"t_bucket\":\"<=4096\",\"waves\":\"<1\",\"dtype\":\"bf16\",\"varlen\":false,\"kind\":\"forward\","
    "\"precision\":\"ieee\"},\"config\":{\"chunk\":64,\"block_v\":32,\"warps\":4,\"stages\":1},"
    "\"median_ms\":0.5,\"p20_ms\":0.49,\"p80_ms\":0.51,\"candidates_tried\":4,"
    "\"date\":\"2026-11-29T10:00:00.000Z\",\"host\":\"test\"}\n")
endfunction()

# run(<mode> <expected exit code> <extra args...>): sets `out` (stdout + stderr).
function(run mode expected_rc)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} DGPS_FAKE_CUDA_MODE=${mode} ${EXE} ${common} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr TIMEOUT 1500)
  set(all "${stdout}\n${stderr}")
  file(WRITE "${WORK}/${mode}.log" "${all}")
  if(NOT "${rc}" STREQUAL "${expected_rc}")
    message(FATAL_ERROR "mode ${mode}: exit code ${rc}, expected ${expected_rc}\n${all}")
  endif()
  set(out "${all}" PARENT_SCOPE)
  set(stdout "${stdout}" PARENT_SCOPE)
endfunction()

function(expect mode pattern)
  if(NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "mode ${mode}: output lacks /${pattern}/\n${out}")
  endif()
endfunction()

# Summary last: after Google Benchmark's own lines.
function(expect_summary_last mode)
  string(FIND "${stdout}" "## dgps-bench summary" at_summary)
  string(FIND "${stdout}" "BM_forward/gdn" at_bench REVERSE)
  if(at_summary LESS 0 OR at_summary LESS at_bench)
    string(FIND "${stdout}" "| gdn |" at_row REVERSE)
    if(at_summary LESS 0 OR at_row LESS at_summary)
      message(FATAL_ERROR "mode ${mode}: the summary table is not printed last\n${stdout}")
    endif()
  endif()
endfunction()

# 1. Kernels that write nothing: the guard sees the NaN poison and refuses to time. The record in the
#    database carries a placeholder codegen identity, so the bench must name the one it looks for: the
#    tuner's (tune::codegenIdentity, "cg<version>-<hash>"), which dgps-tune stamps into its records.
write_db(cg-placeholder)
run(noop 1)
string(REGEX MATCH "codegen_version 'cg-placeholder' != '([^']+)'" _ "${out}")
set(codegen "${CMAKE_MATCH_1}")
if(NOT codegen MATCHES "^cg[0-9]+-[0-9a-f]+$")
  message(FATAL_ERROR "mode noop: the bench does not look tuning records up under the tuner's codegen identity "
                      "(found '${codegen}')\n${out}")
endif()
expect(noop "Fake H200")
expect(noop "copy bandwidth")
expect(noop "wrong result at gdn forward")
expect(noop "NaN/inf")
expect(noop "\\| gdn \\| forward \\| B8_T4096_H16_K128_V128 \\| default C[0-9]+ BV[0-9]+ W[0-9]+ S[0-9]+ \\| – \\|")
expect(noop "WRONG")
expect_summary_last(noop)

# 2. Zeros are finite but wrong: the relative error exceeds the tolerance.
run(zeros 1)
expect(zeros "o: \\|\\|out - ref\\|\\| / \\|\\|ref\\|\\| = 1 > tolerance 0.01|o: //out - ref// / //ref// = 1 > tolerance 0.01")

# 3. Unchecked: every step up to the table runs and the row carries numbers. The record, now under the
#    identity the bench reported, adds a "tuned" row for B8_T4096.
write_db(${codegen})
set(env LD_LIBRARY_PATH=${FAKE_DIR} DGPS_CACHE_DIR=${WORK}/cache DGPS_TUNING_DB=${WORK}/tuning.jsonl)
#    The fake's forward "kernel" zeroes 134 MB on the host (tens of ms), so a 0.1 s budget cuts the
#    asked 50 repetitions (never below 10) and the row says how many were timed.
run(zeros 0 --dgps_no_check --dgps_table=${WORK}/table.md --dgps_reps=50 --dgps_budget_s=0.1)
expect(zeros "\\| gdn \\| forward \\| B8_T4096_H16_K128_V128 \\| tuned C64 BV32 W4 S1 \\| [0-9]+\\.[0-9]+ \\[")
expect(zeros "\\| gdn \\| forward \\| B8_T4096_H16_K128_V128 \\| default C[0-9]+ BV[0-9]+ W[0-9]+ S[0-9]+ \\| [0-9.]+ \\[[0-9., ]+\\] n=[0-9]+ \\|")
expect(zeros "\\| gdn \\| decode \\| B256_H16_K128_V128 \\| default C[0-9]+ BV[0-9]+ W[0-9]+ S[0-9]+ \\| [0-9]")
expect(zeros "UNCHECKED")
expect(zeros "gdn B256_H16_K128_V128 default: [0-9.]+ ms = [0-9.]+ µs per step = [0-9.]+ TB/s")
expect_summary_last(zeros)
if(NOT EXISTS "${WORK}/table.md")
  message(FATAL_ERROR "--dgps_table did not write ${WORK}/table.md")
endif()

# 4. A faulting kernel loses the context: later benchmarks say so instead of failing confusingly.
run(fault 1 --dgps_no_check)
expect(fault "- BM_forward/gdn/B8_T4096_H16_K128_V128/default: [^\n]*CUDA_ERROR_ILLEGAL_ADDRESS")
expect(fault "- BM_decode/gdn/B256_H16_K128_V128/default: not run: BM_forward/gdn/B8_T4096_H16_K128_V128/default lost the CUDA context")

# 5. A hanging kernel: the watchdog prints what it waited for and the partial table, exit code 3.
run(hang 3 --dgps_no_check --dgps_hang_s=3)
expect(hang "has not finished after")
expect(hang "## dgps-bench summary")

message(STATUS "dgps-bench fake-GPU test: ok")
