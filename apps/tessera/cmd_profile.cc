#include "cmd_profile.h"

#include <fmt/format.h>

#include "table.h"
#include "common/names.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kProfileCommand = "profile";

std::string formatBytes(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1ull << 20)) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (bytes < (1ull << 30)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  return fmt::format("{:.2f} GiB", b / (1 << 30));
}

std::string formatCount(std::uint64_t n) {
  const double v = static_cast<double>(n);
  if (n >= 1'000'000'000) return fmt::format("{:.2f} B", v / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f} M", v / 1e6);
  if (n >= 10'000) return fmt::format("{:.1f} K", v / 1e3);
  return std::to_string(n);
}

std::string dtypeBytes(const profile::KvDtype& d) {
  if (d.bytesPer32 % 32 == 0) return fmt::format("{} B", d.bytesPer32 / 32);
  return fmt::format("{}/32 B", d.bytesPer32);
}

void printTable(const profile::ModelFiles& m, const profile::Estimate& e,
                const profile::EstimateOptions& o, const model::ModelProfile& p,
                std::ostream& out) {
  const auto row = [&](std::string_view label, const std::string& text) {
    out << fmt::format("{:<13}{}\n", label, text);
  };
  row("model", p.name);
  std::string source = fmt::format("{}, {} file{}", profile::modelFormatName(m.format),
                                   m.files.size(), m.files.size() == 1 ? "" : "s");
  if (!m.configPath.empty()) source += ", " + m.configPath;
  row("source", source);
  if (m.shape) {
    const profile::ModelShape& s = *m.shape;
    std::string shape =
        fmt::format("{} layers, {} heads, {} KV heads{}, head dim {}", s.layers, s.attentionHeads,
                    s.kvHeads, s.perLayerKvHeads.empty() ? "" : " (per layer, at most)", s.headDim);
    if (s.valueHeadDim != s.headDim) shape += fmt::format(" (V {})", s.valueHeadDim);
    if (s.mlaCacheDim > 0) shape += fmt::format(", MLA latent {}", s.mlaCacheDim);
    if (s.maxContext > 0) shape += fmt::format(", context {}", s.maxContext);
    row("architecture", (s.architecture.empty() ? "" : s.architecture + ": ") + shape);
  } else {
    row("architecture", "unknown (no config.json or GGUF architecture)");
  }
  row("parameters", fmt::format("{} ({} tensors)", formatCount(m.parameters), m.tensorCount));
  out << '\n';

  Table dtypes({{"dtype"},
                {"tensors", Align::kRight},
                {"parameters", Align::kRight},
                {"bytes", Align::kRight},
                {"share", Align::kRight}});
  for (const auto& [name, t] : m.byDtype) {
    dtypes.addRow(
        {name, std::to_string(t.tensors), formatCount(t.parameters), formatBytes(t.bytes),
         formatPercent(static_cast<long long>(t.bytes), static_cast<long long>(m.weightBytes))});
  }
  if (!dtypes.empty()) {
    dtypes.print(out, "  ");
    out << '\n';
  }

  row("weights", formatBytes(e.weightBytes));
  if (m.shape) {
    row("KV cache",
        fmt::format("{} per token ({}: {} × {})", formatBytes(e.kvBytesPerToken), e.kvDtype.name,
                    m.shape->kvFormula(e.tensorParallel), dtypeBytes(e.kvDtype)));
    row("", fmt::format("× {} tokens × {} sequence{} = {}", e.context, e.concurrency,
                        e.concurrency == 1 ? "" : "s", formatBytes(e.kvCacheBytes)));
  } else {
    row("KV cache", "not estimated");
  }
  row("overhead",
      fmt::format("{} ({} MiB per GPU × {} + {:g} % of the weights)", formatBytes(e.overheadBytes),
                  o.overheadPerGpuMib, e.tensorParallel, o.activationFraction * 100));
  row("replica",
      fmt::format("{} on {} GPU{}, {} per GPU", formatBytes(e.totalBytes), e.tensorParallel,
                  e.tensorParallel == 1 ? "" : "s", formatBytes(e.perGpuBytes)));
  row("profile", fmt::format("weightsMib {}, kvCacheMib {}, overheadMib {}, gpusPerReplica {} "
                             "({} per GPU)",
                             p.weightsMib, p.kvCacheMib, p.overheadMib, p.gpusPerReplica,
                             formatMib(p.memoryPerGpuMib())));
  for (const std::string& note : m.notes) out << "note: " << note << '\n';
  for (const std::string& note : e.notes) out << "note: " << note << '\n';
}

}  // namespace

int runProfile(const ProfileOptions& o, std::ostream& out, std::ostream& err) {
  if (auto ok = profile::checkEstimateOptions(o.estimate); !ok) {
    return reportError(err, kProfileCommand, ok.error());
  }
  if (o.name) {
    if (auto why = checkName(*o.name, NameKind::kSubdomain)) {
      return reportError(err, kProfileCommand, Error::invalid("--name: " + *why));
    }
  }
  auto model = profile::inspectModel(o.path);
  if (!model) return reportError(err, kProfileCommand, model.error());
  auto estimate = profile::estimateMemory(*model, o.estimate);
  if (!estimate) return reportError(err, kProfileCommand, estimate.error());
  const model::ModelProfile p = profile::toModelProfile(*estimate, o.name.value_or(model->name));
  if (o.format == OutputFormat::kJson) {
    // Exactly the POST /api/v1/models body; notes go to stderr so stdout can be piped.
    for (const std::string& note : model->notes) err << "tessera profile: note: " << note << '\n';
    for (const std::string& note : estimate->notes) {
      err << "tessera profile: note: " << note << '\n';
    }
    out << profile::modelRequestBody(p).dump() << '\n';
    return kExitOk;
  }
  printTable(*model, *estimate, o.estimate, p, out);
  return kExitOk;
}

ProfileCommand::ProfileCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "profile",
      "Read a model's safetensors, GGUF or config.json headers and estimate the GPU memory a "
      "replica needs");
  ProfileOptions& o = options_;
  command_->add_option("PATH", o.path, "A .safetensors or .gguf file, or a model directory")
      ->required();
  command_
      ->add_option("--context", o.estimate.context,
                   "Tokens per sequence (default: the model's maximum context, else 4096)")
      ->check(CLI::Range(1, 1 << 24).description("1 to 16777216 tokens"));
  command_
      ->add_option("--concurrency", o.estimate.concurrency,
                   "Sequences held at full context at once")
      ->capture_default_str();
  command_
      ->add_option("--kv-dtype", o.estimate.kvDtype,
                   "KV-cache type: auto, fp16, bf16, fp32, fp8, fp8_e4m3, fp8_e5m2, int8, q8_0, q4_0")
      ->capture_default_str();
  command_
      ->add_option("--tp", o.estimate.tensorParallel, "Tensor-parallel degree (GPUs per replica)")
      ->capture_default_str();
  command_
      ->add_option("--overhead-per-gpu", o.estimate.overheadPerGpuMib,
                   "MiB per GPU for the CUDA context, workspaces and allocator slack")
      ->capture_default_str();
  command_
      ->add_option("--activation-fraction", o.estimate.activationFraction,
                   "Activations and scratch, as a fraction of the weights")
      ->capture_default_str();
  command_->add_option("--name", o.name, "Model name (default: the directory or file name)");
  command_
      ->add_option("-o,--output", output_,
                   "table (for people) or json (the body of POST /api/v1/models)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

int ProfileCommand::run(std::ostream& out, std::ostream& err) {
  options_.format = output_ == "json" ? OutputFormat::kJson : OutputFormat::kTable;
  return runProfile(options_, out, err);
}

}  // namespace tessera::cli
