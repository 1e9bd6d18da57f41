// A small stand-in for libFuzzer's main, for compilers without -fsanitize=fuzzer (CI builds
// with GCC). It runs every file of the seed corpus through LLVMFuzzerTestOneInput, then feeds
// it random mutations of the corpus for a bounded time or number of runs. There is no
// coverage feedback: mutations are byte-level (flips, inserts, deletes, duplicated ranges,
// dictionary tokens, splices of two corpus entries) and JSON-aware (a node of the parsed
// document replaced by another type, a subtree from another entry or an interesting value;
// a key dropped, added or re-cased; array items dropped or duplicated), stacked 1 to 5 deep.
// Inputs that still parse as JSON join a bounded pool that later mutations start from.
//
//   <target> [-runs=N] [-max_total_time=S] [-seed=N] [-max_len=N] [-timeout=S]
//            [-artifact_prefix=PATH] [corpus dir or file ...]
//
// Flags use libFuzzer's spelling. Environment (overrides the flags, so CI's bound can be
// stretched without editing CMake): TESSERA_FUZZ_SECONDS, TESSERA_FUZZ_RUNS,
// TESSERA_FUZZ_SEED. With neither -runs nor -max_total_time the corpus is run and then
// mutated for 10 s. -runs=0 only runs the corpus (use it to replay a saved crash).
//
// On a crash (a sanitizer report, an abort from a failed invariant, an uncaught exception, a
// signal) or a timeout the input being run is written to <artifact_prefix>crash-<seed>-<n>
// (timeout-... for timeouts) and the seed is printed; the process then dies as it would have.

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define TESSERA_FUZZ_HAVE_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/common_interface_defs.h>
#define TESSERA_FUZZ_HAVE_SANITIZER 1
#endif
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

using nlohmann::json;

// ---- crash reporting (async-signal-safe: only write/open/close on preallocated data) ------

const std::uint8_t* gInput = nullptr;
std::size_t gInputSize = 0;
char gCrashPath[4096];
char gTimeoutPath[4096];
volatile sig_atomic_t gReported = 0;
volatile sig_atomic_t gFromFile = 0;  // the input is a corpus file: name it, write nothing

void writeString(int fd, const char* s) {
  ssize_t ignored = ::write(fd, s, std::strlen(s));
  (void)ignored;
}

void saveInput(const char* path, const char* what) {
  if (gReported || gInput == nullptr) return;
  gReported = 1;
  if (gFromFile) {
    writeString(2, "\n==driver== ");
    writeString(2, what);
    writeString(2, " on corpus file ");
    writeString(2, path);
    writeString(2, "\n");
    return;
  }
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    std::size_t done = 0;
    while (done < gInputSize) {
      const ssize_t n = ::write(fd, gInput + done, gInputSize - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }
  writeString(2, "\n==driver== ");
  writeString(2, what);
  writeString(2, ": input written to ");
  writeString(2, path);
  writeString(2, " (replay: <target> -runs=0 <that file>)\n");
}

#ifdef TESSERA_FUZZ_HAVE_SANITIZER
void onDeath() {
  saveInput(gCrashPath, "crash");
}
#endif

void onSignal(int sig) {
  if (sig == SIGALRM) {
    saveInput(gTimeoutPath, "timeout");
    ::_exit(70);
  }
  saveInput(gCrashPath, "crash");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void installHandlers() {
#ifdef TESSERA_FUZZ_HAVE_SANITIZER
  __sanitizer_set_death_callback(onDeath);
#endif
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  // With a sanitizer, it owns SEGV/BUS/FPE and calls onDeath; abort() (a failed invariant,
  // an uncaught exception) and timeouts come here either way.
  std::vector<int> signals = {SIGABRT, SIGALRM};
#ifndef TESSERA_FUZZ_HAVE_SANITIZER
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signals.push_back(s);
  // Stack overflows need an alternate stack to report on.
  static std::vector<char> altStack(1 << 16);
  stack_t ss{};
  ss.ss_sp = altStack.data();
  ss.ss_size = altStack.size();
  ::sigaltstack(&ss, nullptr);
  sa.sa_flags = SA_ONSTACK;
#endif
  for (int s : signals) ::sigaction(s, &sa, nullptr);
}

// ---- options ------------------------------------------------------------------------------

struct Options {
  long long runs = -1;     // mutations after the corpus; -1 = bounded by time only
  double maxSeconds = -1;  // -1 = not given
  std::uint64_t seed = 0;
  bool seedGiven = false;
  std::size_t maxLen = 64 * 1024;
  unsigned timeoutSeconds = 30;
  std::string artifactPrefix = "./";
  std::vector<std::string> inputs;
};

bool flag(const std::string& arg, const char* name, std::string& value) {
  const std::string prefix = std::string("-") + name + "=";
  if (!arg.starts_with(prefix)) return false;
  value = arg.substr(prefix.size());
  return true;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    if (flag(arg, "runs", v)) {
      o.runs = std::stoll(v);
    } else if (flag(arg, "max_total_time", v)) {
      o.maxSeconds = std::stod(v);
    } else if (flag(arg, "seed", v)) {
      o.seed = std::stoull(v);
      o.seedGiven = true;
    } else if (flag(arg, "max_len", v)) {
      o.maxLen = std::stoull(v);
    } else if (flag(arg, "timeout", v)) {
      o.timeoutSeconds = static_cast<unsigned>(std::stoul(v));
    } else if (flag(arg, "artifact_prefix", v)) {
      o.artifactPrefix = v;
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "driver: ignoring unknown flag %s\n", arg.c_str());
    } else {
      o.inputs.push_back(arg);
    }
  }
  if (const char* e = std::getenv("TESSERA_FUZZ_SECONDS"); e && *e) o.maxSeconds = std::stod(e);
  if (const char* e = std::getenv("TESSERA_FUZZ_RUNS"); e && *e) o.runs = std::stoll(e);
  if (const char* e = std::getenv("TESSERA_FUZZ_SEED"); e && *e) {
    o.seed = std::stoull(e);
    o.seedGiven = true;
  }
  if (o.runs < 0 && o.maxSeconds < 0) o.maxSeconds = 10;
  if (!o.seedGiven) {
    o.seed = static_cast<std::uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count() ^ (::getpid() << 16));
  }
  return o;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void collect(const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "driver: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    out.emplace_back(path, readFile(path));
    return;
  }
  std::vector<std::string> names;
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(path + "/" + e->d_name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) collect(n, out);
}

// ---- mutations ----------------------------------------------------------------------------

class Mutator {
 public:
  Mutator(std::uint64_t seed, std::vector<std::string> corpus, std::size_t maxLen)
      : rng_(seed), corpus_(std::move(corpus)), maxLen_(maxLen) {
    for (const std::string& c : corpus_) {
      json j = json::parse(c, nullptr, false);
      if (j.is_discarded()) continue;
      harvest(j);
      parsed_.push_back(std::move(j));
    }
    for (const char* t : {"{", "}", "[", "]", "\"", ":", ",", "null", "true", "false", "0", "-1",
                          "1e308", "\"\"", "{}", "[]", "\\u0000", "\\ud800", "\xff"}) {
      tokens_.push_back(t);
    }
  }

  std::string next() {
    std::string s = pick();
    const int depth = 1 + static_cast<int>(below(5));
    for (int i = 0; i < depth; ++i) mutate(s);
    if (s.size() > maxLen_) s.resize(maxLen_);
    return s;
  }

  // Keeps inputs that are still JSON as starting points for later mutations.
  void keep(const std::string& s) {
    if (!json::accept(s)) return;
    if (pool_.size() < 512) {
      pool_.push_back(s);
    } else {
      pool_[below(pool_.size())] = s;
    }
  }

 private:
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }

  std::string pick() {
    if (!pool_.empty() && chance(40)) return pool_[below(pool_.size())];
    if (corpus_.empty()) return "{}";
    return corpus_[below(corpus_.size())];
  }

  void harvest(const json& j) {
    std::vector<const json*> stack{&j};
    while (!stack.empty()) {
      const json* v = stack.back();
      stack.pop_back();
      if (v->is_object()) {
        for (const auto& [k, child] : v->items()) {
          keys_.insert(k);
          stack.push_back(&child);
        }
      } else if (v->is_array()) {
        for (const json& child : *v) stack.push_back(&child);
      } else if (v->is_string()) {
        strings_.insert(v->get<std::string>());
      }
    }
    for (const std::string& k : keys_) tokens_.push_back("\"" + k + "\"");
  }

  template <typename Set>
  std::string any(const Set& set, const std::string& fallback) {
    if (set.empty()) return fallback;
    auto it = set.begin();
    std::advance(it, static_cast<long>(below(set.size())));
    return *it;
  }

  json interestingValue() {
    static const json kValues = json::parse(R"([
      null, true, false, 0, 1, -1, 2, 8, 64, 65, 1000, 1001, 2147483647, 2147483648,
      4294967297, -9223372036854775808, 9223372036854775807, 18446744073709551615, 0.5, -0.0,
      1e308, -1e308, 4.9e-324, "", "0", "1", "-1", "1.5", "500m", "4Gi", "80Gi", "1e3",
      "9e18", "9.2e18", "1e19", "4294967297", "18446744073709551616", "1Ei", "8Ei", "+1",
      "--1", "1e-300", "0.000000001", "1e300", "Exists", "Equal", "exclusive", "mig,shared",
      "1g.10gb", "A100-80GB,T4", "llama-7b", "llama-70b", "gpu-a", "gpu-mig", "x\u0000y",
      "\u00e9", "NoSchedule", {}, [], [null], {"": null}
    ])");
    if (chance(30) && !strings_.empty()) return any(strings_, "");
    return kValues[below(kValues.size())];
  }

  void mutate(std::string& s) {
    switch (below(12)) {
      case 0:
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:
        if (!s.empty()) s[below(s.size())] = static_cast<char>(below(256));
        break;
      case 2:
        s.insert(below(s.size() + 1), 1, static_cast<char>(below(256)));
        break;
      case 3:
        if (!s.empty()) {
          const std::size_t at = below(s.size());
          s.erase(at, 1 + below(std::min<std::size_t>(16, s.size() - at)));
        }
        break;
      case 4:
        if (!s.empty()) {
          const std::size_t at = below(s.size());
          const std::string piece = s.substr(at, 1 + below(64));
          s.insert(below(s.size() + 1), piece);
        }
        break;
      case 5:
        s.insert(below(s.size() + 1), tokens_[below(tokens_.size())]);
        break;
      case 6: {  // splice: a prefix of this one, a suffix of another
        const std::string other = pick();
        s = s.substr(0, below(s.size() + 1)) + other.substr(below(other.size() + 1));
        break;
      }
      default:
        mutateJson(s);
        break;
    }
  }

  void mutateJson(std::string& s) {
    json doc = json::parse(s, nullptr, false);
    if (doc.is_discarded()) {
      s.insert(below(s.size() + 1), tokens_[below(tokens_.size())]);
      return;
    }
    std::vector<json*> nodes{&doc};
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      json* v = nodes[i];
      if (v->is_object()) {
        for (auto& [k, child] : v->items()) nodes.push_back(&child);
      } else if (v->is_array()) {
        for (json& child : *v) nodes.push_back(&child);
      }
    }
    json& target = *nodes[below(nodes.size())];
    switch (below(9)) {
      case 0:
      case 1:
        target = interestingValue();
        break;
      case 2:  // a subtree of another entry
        if (!parsed_.empty()) {
          const json& from = parsed_[below(parsed_.size())];
          std::vector<const json*> pool{&from};
          for (std::size_t i = 0; i < pool.size() && pool.size() < 4096; ++i) {
            if (pool[i]->is_object()) {
              for (const auto& [k, c] : pool[i]->items()) pool.push_back(&c);
            } else if (pool[i]->is_array()) {
              for (const json& c : *pool[i]) pool.push_back(&c);
            }
          }
          target = *pool[below(pool.size())];
        }
        break;
      case 3:  // drop a key, or an array item
        if (target.is_object() && !target.empty()) {
          auto it = target.begin();
          std::advance(it, static_cast<long>(below(target.size())));
          target.erase(it);
        } else if (target.is_array() && !target.empty()) {
          target.erase(target.begin() + static_cast<long>(below(target.size())));
        }
        break;
      case 4:  // add a known key, or duplicate an array item
        if (target.is_object()) {
          target[any(keys_, "x")] = interestingValue();
        } else if (target.is_array() && !target.empty()) {
          const json copy = target[below(target.size())];
          const std::size_t times = chance(10) ? 1 + below(200) : 1;
          for (std::size_t i = 0; i < times; ++i) target.push_back(copy);
        }
        break;
      case 5:  // re-case a key: the extender decodes Go field names ignoring case
        if (target.is_object() && !target.empty()) {
          auto it = target.begin();
          std::advance(it, static_cast<long>(below(target.size())));
          std::string key = it.key();
          json value = *it;
          target.erase(it);
          for (char& c : key) {
            if (chance(50))
              c = static_cast<char>(std::isupper(static_cast<unsigned char>(c)) ? std::tolower(c)
                                                                                : std::toupper(c));
          }
          target[key] = std::move(value);
        }
        break;
      case 6:  // wrap
        target = chance(50) ? json::array({target}) : json{{any(keys_, "x"), target}};
        break;
      case 7:  // change a string or a number a little
        if (target.is_string()) {
          std::string t = target.get<std::string>();
          if (!t.empty() && chance(50)) {
            t.erase(below(t.size()), 1);
          } else {
            t.insert(below(t.size() + 1), 1, "0123456789.-+eEmkKMGTi ,"[below(24)]);
          }
          target = t;
        } else if (target.is_number()) {
          target = target.get<double>() * (chance(50) ? -1 : 1024);
        } else {
          target = interestingValue();
        }
        break;
      default:  // a node of another type
        target = chance(50) ? json(target.dump()) : json::object();
        break;
    }
    s = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  std::mt19937_64 rng_;
  std::vector<std::string> corpus_;
  std::vector<json> parsed_;
  std::vector<std::string> pool_;
  std::set<std::string> keys_;
  std::set<std::string> strings_;
  std::vector<std::string> tokens_;
  std::size_t maxLen_;
};

void runOne(const std::string& input, unsigned timeoutSeconds) {
  gInput = reinterpret_cast<const std::uint8_t*>(input.data());
  gInputSize = input.size();
  if (timeoutSeconds > 0) ::alarm(timeoutSeconds);
  (void)LLVMFuzzerTestOneInput(gInput, gInputSize);
  if (timeoutSeconds > 0) ::alarm(0);
  gInput = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef TESSERA_FUZZ_HAVE_SANITIZER
  // GCC links UBSan as its own runtime, which does not call ASan's death callback: make its
  // reports abort (SIGABRT comes to onSignal), restarting once with the option set.
  const char* ubsan = std::getenv("UBSAN_OPTIONS");
  if (ubsan == nullptr || std::strstr(ubsan, "abort_on_error=1") == nullptr) {
    if (std::getenv("TESSERA_FUZZ_REEXEC") == nullptr) {
      const std::string options =
          std::string(ubsan != nullptr && *ubsan ? ubsan : "print_stacktrace=1") +
          ":abort_on_error=1";
      ::setenv("UBSAN_OPTIONS", options.c_str(), 1);
      ::setenv("TESSERA_FUZZ_REEXEC", "1", 1);
      ::execv("/proc/self/exe", argv);
      // execv failed: go on; UBSan reports then die without saving the input.
    }
  }
#endif
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  const Options o = parseOptions(argc, argv);
  std::snprintf(gCrashPath, sizeof gCrashPath, "%scrash-%llu", o.artifactPrefix.c_str(),
                static_cast<unsigned long long>(o.seed));
  std::snprintf(gTimeoutPath, sizeof gTimeoutPath, "%stimeout-%llu", o.artifactPrefix.c_str(),
                static_cast<unsigned long long>(o.seed));
  installHandlers();

  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& in : o.inputs) collect(in, files);
  std::fprintf(stderr, "driver: seed=%llu (rerun: -seed=%llu), %zu corpus inputs\n",
               static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.seed),
               files.size());
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<std::string> corpus;
  for (const auto& [path, data] : files) {
    // A corpus file that fails is its own reproducer: it is named, not copied.
    std::snprintf(gCrashPath, sizeof gCrashPath, "%s", path.c_str());
    std::snprintf(gTimeoutPath, sizeof gTimeoutPath, "%s", path.c_str());
    gFromFile = 1;
    runOne(data, o.timeoutSeconds);
    gFromFile = 0;
    corpus.push_back(data);
  }
  Mutator mutator(o.seed, corpus, o.maxLen);
  long long runs = 0;
  double lastReport = 0;
  while ((o.runs < 0 || runs < o.runs) && (o.maxSeconds < 0 || elapsed() < o.maxSeconds)) {
    const std::string input = mutator.next();
    std::snprintf(gCrashPath, sizeof gCrashPath, "%scrash-%llu-%lld", o.artifactPrefix.c_str(),
                  static_cast<unsigned long long>(o.seed), runs);
    std::snprintf(gTimeoutPath, sizeof gTimeoutPath, "%stimeout-%llu-%lld",
                  o.artifactPrefix.c_str(), static_cast<unsigned long long>(o.seed), runs);
    runOne(input, o.timeoutSeconds);
    mutator.keep(input);
    ++runs;
    if (elapsed() - lastReport >= 5) {
      lastReport = elapsed();
      std::fprintf(stderr, "driver: %lld mutations in %.1f s\n", runs, lastReport);
    }
  }
  std::fprintf(stderr,
               "driver: done: %zu corpus inputs and %lld mutations in %.1f s (%.0f/s), seed=%llu, "
               "no failure\n",
               corpus.size(), runs, elapsed(), runs / std::max(elapsed(), 1e-9),
               static_cast<unsigned long long>(o.seed));
  return 0;
}
