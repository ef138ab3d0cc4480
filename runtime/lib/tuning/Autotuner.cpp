#include "dgps/runtime/tuning/Autotuner.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>

#include "dgps/runtime/tuning/Stats.h"

namespace dgps::tuning {
namespace {

using Clock = std::chrono::steady_clock;

/// Backend calls must not let an exception escape the tuner; a throwing call is a failed trial.
template <typename Result, typename Fn>
Result guarded(TrialStatus onThrow, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    Result r;
    r.status = onThrow;
    if constexpr (std::is_same_v<Result, CompileResult>) r.log = std::string("backend threw: ") + e.what();
    else r.message = std::string("backend threw: ") + e.what();
    return r;
  } catch (...) {
    Result r;
    r.status = onThrow;
    if constexpr (std::is_same_v<Result, CompileResult>) r.log = "backend threw a non-standard exception";
    else r.message = "backend threw a non-standard exception";
    return r;
  }
}

/// The first line of a compiler log, shortened for the table.
std::string headline(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 160) line = line.substr(0, 157) + "...";
  return line;
}

std::string fmt(double v, const char* f = "%.4f") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

bool usableSamples(const std::vector<float>& ms) {
  if (ms.empty()) return false;
  for (float x : ms)
    if (!std::isfinite(x) || x <= 0.0f) return false;
  return true;
}

/// Add a note to a row's message, keeping what earlier steps said (e.g. the spill note).
void addNote(CandidateReport& row, const std::string& note) {
  if (note.empty()) return;
  row.message = row.message.empty() ? note : row.message + "; " + note;
}

void setSummary(CandidateReport& row, const std::vector<double>& samples) {
  const SampleSummary s = summarize(samples);
  row.median_ms = s.median;
  row.p20_ms = s.p20;
  row.p80_ms = s.p80;
}

struct CompileSlot {
  std::atomic<bool> cancel{false};
  bool started = false;
  bool finished = false;
  bool reported = false;
  Clock::time_point deadline;
  Clock::time_point finishedAt;
  CompileResult result;
};

}  // namespace

const char* toString(TunePhase p) {
  switch (p) {
    case TunePhase::Compile: return "compile";
    case TunePhase::Screen: return "screen";
    case TunePhase::Time: return "time";
    case TunePhase::Retime: return "retime";
    case TunePhase::Done: return "done";
  }
  return "?";
}

Autotuner::Autotuner(TrialBackend& backend, TunerOptions options)
    : backend_(backend), options_(std::move(options)) {}

void Autotuner::report(TunePhase phase, int done, int total, const CandidateReport& row) {
  if (!progress_) return;
  try {
    progress_(TuneProgress{phase, done, total, row.config, row.status});
  } catch (...) {
    // A failing progress bar must not abort tuning.
  }
}

namespace {

/// Step 1: compile all rows on a thread pool; the calling thread enforces deadlines and reports
/// progress as compiles finish.
void compileAll(TrialBackend& backend, const TunerOptions& opt, std::vector<CandidateReport>& rows,
                const std::function<void(int, const CandidateReport&)>& progress) {
  const int n = static_cast<int>(rows.size());
  if (n == 0) return;
  int threads = opt.compile_threads;
  if (threads <= 0) threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8);
  threads = std::min(threads, n);

  std::unique_ptr<CompileSlot[]> slots(new CompileSlot[n]);
  std::mutex mutex;
  std::condition_variable cv;
  int next = 0;

  auto worker = [&] {
    for (;;) {
      int i;
      Clock::time_point deadline;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (next >= n) return;
        i = next++;
        slots[i].started = true;
        slots[i].deadline = deadline = Clock::now() + opt.compile_timeout;
      }
      const CompileControl control{deadline, &slots[i].cancel};
      CompileResult r = guarded<CompileResult>(TrialStatus::CompileError, [&] {
        return backend.compile(rows[i].config, control);
      });
      std::lock_guard<std::mutex> lock(mutex);
      slots[i].result = std::move(r);
      slots[i].finishedAt = Clock::now();
      slots[i].finished = true;
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);

  int done = 0;
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (done < n) {
      cv.wait_for(lock, std::chrono::milliseconds(20));
      const auto now = Clock::now();
      for (int i = 0; i < n; ++i) {
        CompileSlot& s = slots[i];
        if (s.started && !s.finished && now >= s.deadline) s.cancel = true;
        if (!s.finished || s.reported) continue;
        s.reported = true;
        CandidateReport& row = rows[i];
        row.registers = s.result.registers;
        row.local_bytes = s.result.local_bytes;
        if (s.finishedAt > s.deadline || s.result.status == TrialStatus::Timeout) {
          row.status = TrialStatus::Timeout;
          row.message = "compile exceeded " + std::to_string(opt.compile_timeout.count()) + " ms";
        } else if (s.result.status != TrialStatus::Ok) {
          row.status = s.result.status == TrialStatus::CompileError ? TrialStatus::CompileError
                                                                   : s.result.status;
          row.message = headline(s.result.log.empty() ? "compile failed" : s.result.log);
        } else {
          row.status = TrialStatus::Ok;
        }
        ++done;
        lock.unlock();
        progress(done, row);
        lock.lock();
      }
    }
  }
  for (std::thread& t : pool) t.join();
}

/// Step 2 (docs/math.md §7.5): drop spilling candidates when a spill-free one exists.
void filterSpills(std::vector<CandidateReport>& rows) {
  bool anySpillFree = false;
  for (const CandidateReport& r : rows)
    if (r.status == TrialStatus::Ok && r.local_bytes == 0) anySpillFree = true;
  for (CandidateReport& r : rows) {
    if (r.status != TrialStatus::Ok || r.local_bytes <= 0) continue;
    const std::string bytes = std::to_string(r.local_bytes) + " bytes of local memory per thread";
    if (anySpillFree) {
      r.status = TrialStatus::Spills;
      r.message = bytes + " while spill-free candidates exist";
    } else {
      r.message = bytes + " (kept: no spill-free candidate)";
    }
  }
}

std::vector<int> aliveIndices(const std::vector<CandidateReport>& rows) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(rows.size()); ++i)
    if (rows[i].status == TrialStatus::Ok) out.push_back(i);
  return out;
}

}  // namespace

TuneResult Autotuner::tune(const DeviceFingerprint& device, const ProblemKey& key,
                           const CandidateSet& candidates) {
  TuneResult result;
  for (const PrunedCandidate& p : candidates.pruned) {
    CandidateReport row;
    row.config = p.config;
    row.status = TrialStatus::Pruned;
    row.message = p.reason;
    result.table.push_back(row);
  }
  std::vector<CandidateReport> rows;
  for (const TileConfig& c : candidates.kept) {
    CandidateReport row;
    row.config = c;
    rows.push_back(row);
  }
  auto finish = [&](Status status) {
    result.table.insert(result.table.end(), rows.begin(), rows.end());
    result.status = std::move(status);
    CandidateReport none;
    report(TunePhase::Done, 1, 1, none);
    return result;
  };

  if (rows.empty())
    return finish(Status::error("no tile configuration survived static pruning for key " +
                                key.str() + (candidates.pruned.empty()
                                                 ? std::string(" (the tuning space is empty)")
                                                 : "; first reason: " + candidates.pruned[0].reason)));

  // Any non-Ok call may have been a fault that killed an in-process context.
  std::string contextLostBy;

  // 1-2. Compile, spill filter.
  const int total = static_cast<int>(rows.size());
  compileAll(backend_, options_, rows, [&](int done, const CandidateReport& row) {
    report(TunePhase::Compile, done, total, row);
  });
  if (options_.reject_spills) filterSpills(rows);
  // Loading a module can also hit a sticky error; do not trial anything on a dead context.
  if (!backend_.contextHealthy()) contextLostBy = "compiling/loading the candidates";

  auto checkContext = [&](const CandidateReport& row) {
    if (row.status != TrialStatus::Ok && contextLostBy.empty() && !backend_.contextHealthy())
      contextLostBy = "candidate " + toString(row.config);
    return contextLostBy.empty();
  };
  auto contextLost = [&] {
    for (CandidateReport& r : rows)
      if (r.status == TrialStatus::Ok) {
        r.status = TrialStatus::Skipped;
        addNote(r, "not tried: the GPU context was lost after " + contextLostBy + " failed");
      }
    return finish(Status::error(
        "autotuning aborted: the backend's CUDA context is no longer usable after " + contextLostBy +
        " failed; nothing was recorded. The backend must screen candidates in isolation (child "
        "process or fresh context), see TrialBackend.h"));
  };

  if (!contextLostBy.empty()) return contextLost();

  // 3. Screen: one poisoned run + comparison with the trusted result.
  {
    const std::vector<int> alive = aliveIndices(rows);
    int done = 0;
    for (int i : alive) {
      CandidateReport& row = rows[i];
      const ScreenResult s = guarded<ScreenResult>(TrialStatus::Fault, [&] {
        return backend_.screen(row.config);
      });
      // An error size exists only for runs that produced output.
      if (s.status == TrialStatus::Ok || s.status == TrialStatus::WrongResult)
        row.max_rel_err = s.max_rel_err;
      row.status = s.status;
      addNote(row, s.message);
      if (s.status == TrialStatus::Ok && !(s.max_rel_err <= options_.max_rel_err)) {
        row.status = TrialStatus::WrongResult;
        addNote(row, "max relative error " + fmt(s.max_rel_err, "%.3g") + " > tolerance " +
                         fmt(options_.max_rel_err, "%.3g"));
      }
      report(TunePhase::Screen, ++done, static_cast<int>(alive.size()), row);
      if (!checkContext(row)) return contextLost();
    }
  }

  // 4. Time every survivor.
  std::vector<std::vector<double>> samples(rows.size());
  {
    const std::vector<int> alive = aliveIndices(rows);
    int done = 0;
    for (int i : alive) {
      CandidateReport& row = rows[i];
      const TimingResult t = guarded<TimingResult>(TrialStatus::Fault, [&] {
        return backend_.time(row.config, options_.warmup, options_.reps);
      });
      if (t.status != TrialStatus::Ok) {
        row.status = t.status;
        addNote(row, t.message.empty() ? "timing failed" : t.message);
      } else if (!usableSamples(t.ms)) {
        row.status = TrialStatus::TimingError;
        addNote(row, "timing returned no samples or a non-finite / non-positive one");
      } else {
        samples[i].assign(t.ms.begin(), t.ms.end());
        setSummary(row, samples[i]);
      }
      report(TunePhase::Time, ++done, static_cast<int>(alive.size()), row);
      if (!checkContext(row)) return contextLost();
    }
  }

  std::vector<int> alive = aliveIndices(rows);
  if (alive.empty())
    return finish(Status::error("every candidate failed for key " + key.str() +
                                "; see the table for each one's reason"));

  // 5. Finalists: within finalist_window of the best, fastest first, re-timed interleaved.
  std::sort(alive.begin(), alive.end(), [&](int a, int b) {
    if (rows[a].median_ms != rows[b].median_ms) return rows[a].median_ms < rows[b].median_ms;
    return simplerThan(rows[a].config, rows[b].config);
  });
  const double best = rows[alive.front()].median_ms;
  std::vector<int> finalists;
  for (int i : alive)
    if (rows[i].median_ms <= best * (1.0 + options_.finalist_window) &&
        static_cast<int>(finalists.size()) < std::max(1, options_.max_finalists))
      finalists.push_back(i);
  for (int i : finalists) rows[i].finalist = true;

  if (finalists.size() > 1 && options_.retime_rounds > 0 && options_.retime_reps > 0) {
    const int F = static_cast<int>(finalists.size());
    std::vector<std::vector<double>> again(rows.size());
    const int steps = options_.retime_rounds * F;
    int done = 0;
    for (int round = 0; round < options_.retime_rounds; ++round) {
      for (int j = 0; j < F; ++j) {
        const int i = finalists[(round + j) % F];
        CandidateReport& row = rows[i];
        if (row.status != TrialStatus::Ok) continue;
        const TimingResult t = guarded<TimingResult>(TrialStatus::Fault, [&] {
          return backend_.time(row.config, options_.warmup, options_.retime_reps);
        });
        if (t.status != TrialStatus::Ok || !usableSamples(t.ms)) {
          row.status = t.status != TrialStatus::Ok ? t.status : TrialStatus::TimingError;
          addNote(row, "re-timing failed: " +
                           (t.message.empty() ? std::string("unusable samples") : t.message));
        } else {
          again[i].insert(again[i].end(), t.ms.begin(), t.ms.end());
        }
        report(TunePhase::Retime, ++done, steps, row);
        if (!checkContext(row)) return contextLost();
      }
    }
    for (int i : finalists)
      if (rows[i].status == TrialStatus::Ok) setSummary(rows[i], again[i]);
  }

  // 6. Winner: the simplest among finalists tied (within tie_tolerance) with the best.
  std::vector<int> ok;
  for (int i : finalists)
    if (rows[i].status == TrialStatus::Ok) ok.push_back(i);
  if (ok.empty())
    return finish(Status::error("every finalist failed while re-timing for key " + key.str()));
  double bestFinal = rows[ok.front()].median_ms;
  for (int i : ok) bestFinal = std::min(bestFinal, rows[i].median_ms);
  int winner = -1;
  for (int i : ok) {
    if (rows[i].median_ms > bestFinal * (1.0 + options_.tie_tolerance)) continue;
    if (winner < 0 || simplerThan(rows[i].config, rows[winner].config)) winner = i;
  }
  rows[winner].winner = true;

  TuningRecord rec;
  rec.fingerprint = device;
  rec.key = key;
  rec.config = rows[winner].config;
  // Stored precision, so the returned record equals what a later lookup reads back.
  rec.median_ms = roundToNs(rows[winner].median_ms);
  rec.p20_ms = roundToNs(rows[winner].p20_ms);
  rec.p80_ms = roundToNs(rows[winner].p80_ms);
  rec.candidates_tried = total;
  rec.date = utcNow();
  rec.host = hostName();
  result.record = rec;
  return finish(Status::success());
}

TuneResult Autotuner::tuneOrReuse(TuningDb& db, const DeviceFingerprint& device,
                                  const ProblemKey& key, const CandidateSet& candidates) {
  auto existing = db.findExact(device, key);
  if (!existing) {
    // Another process may have tuned this key since our snapshot.
    if (db.load()) existing = db.findExact(device, key);
  }
  if (existing) {
    TuneResult result;
    result.reused = true;
    result.record = existing;
    CandidateReport row;
    row.config = existing->config;
    row.status = TrialStatus::Ok;
    row.median_ms = existing->median_ms;
    row.p20_ms = existing->p20_ms;
    row.p80_ms = existing->p80_ms;
    row.winner = true;
    row.message = "reused from " + db.path() + " (" + existing->date + ", " + existing->host + ")";
    result.table.push_back(row);
    return result;
  }

  TuneResult result = tune(device, key, candidates);
  if (!result.status || !result.record) return result;

  if (auto base = db.findToolchainBaseline(device, key); base && base->median_ms > 0) {
    result.baseline = base;
    result.regression = result.record->median_ms / base->median_ms - 1.0;
    result.regressed = result.regression > options_.regression_threshold;
  }
  if (Status s = db.append(*result.record); !s) result.db_error = s.message;
  return result;
}

std::string formatTable(const TuneResult& result) {
  std::vector<const CandidateReport*> order;
  for (const CandidateReport& r : result.table) order.push_back(&r);
  auto rank = [](const CandidateReport* r) {
    if (r->winner) return 0;
    if (r->status == TrialStatus::Ok) return 1;
    if (r->status == TrialStatus::Pruned) return 3;
    return 2;
  };
  std::stable_sort(order.begin(), order.end(), [&](const CandidateReport* a, const CandidateReport* b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (rank(a) == 1) return a->median_ms < b->median_ms;
    return false;
  });

  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "  %-44s %-13s %10s %10s %10s %9s %5s %6s  %s\n", "candidate",
                "status", "median_ms", "p20_ms", "p80_ms", "rel_err", "regs", "local", "note");
  out += line;
  for (const CandidateReport* r : order) {
    const char mark = r->winner ? '*' : (r->finalist ? '+' : ' ');
    std::snprintf(line, sizeof line, "%c %-44s %-13s %10s %10s %10s %9s %5s %6s  %s\n", mark,
                  toString(r->config).c_str(), toString(r->status), fmt(r->median_ms).c_str(),
                  fmt(r->p20_ms).c_str(), fmt(r->p80_ms).c_str(),
                  fmt(r->max_rel_err, "%.2e").c_str(),
                  r->registers >= 0 ? std::to_string(r->registers).c_str() : "-",
                  r->local_bytes >= 0 ? std::to_string(r->local_bytes).c_str() : "-",
                  r->message.c_str());
    out += line;
  }
  if (result.baseline) {
    std::snprintf(line, sizeof line,
                  "baseline (toolchain %s / %s / %s): %.4f ms; new winner %+.1f%%%s\n",
                  result.baseline->fingerprint.driver_version.c_str(),
                  result.baseline->fingerprint.nvrtc_version.c_str(),
                  result.baseline->fingerprint.codegen_version.c_str(), result.baseline->median_ms,
                  100.0 * result.regression, result.regressed ? "  REGRESSION" : "");
    out += line;
  }
  return out;
}

}  // namespace dgps::tuning
