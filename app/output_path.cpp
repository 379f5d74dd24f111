#include "app/output_path.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>

#include "tensor/error.h"

namespace phasor {

namespace fs = std::filesystem;

namespace {

// The path with symlinks and ".." resolved as far as it exists; the path itself if that fails.
fs::path canonical_or_self(const std::string& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::path(p) : c;
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool is_sweep_folder(const fs::path& dir) { return is_regular(dir / "plan.json") && fs::is_directory(dir / "cells"); }

[[noreturn]] void refuse(std::string_view command, std::string_view what, const std::string& out, const std::string& file_of) {
  fail(command, ": ", what, " '", out, "' would replace ", file_of, "; write the output elsewhere");
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) return true;
  return canonical_or_self(a) == canonical_or_self(b);
}

void refuse_output_over_inputs(std::string_view command, std::string_view what, const std::string& out,
                               const std::vector<NamedInput>& inputs) {
  for (const auto& [flag, path] : inputs) {
    std::error_code ec;
    if (path.empty() || !fs::exists(path, ec)) continue;
    PHASOR_CHECK(!same_file(out, path), command, ": ", what, " '", out, "' is the ", flag, " it reads ('", path,
                 "'); write the output elsewhere");
  }
}

void refuse_output_folder_in_inputs(std::string_view command, std::string_view what, const std::string& dir,
                                    const std::vector<NamedInput>& inputs) {
  // Resolved paths without a trailing slash: `out` is inside `in` when it is
  // `in` or starts with `in` and a slash.
  const auto resolved = [](const std::string& p) {
    std::string s = canonical_or_self(p).string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  };
  const std::string out = resolved(dir);
  for (const auto& [flag, path] : inputs) {
    std::error_code ec;
    if (path.empty() || !fs::exists(path, ec)) continue;
    const std::string in = resolved(path);
    const bool inside = out == in || out.starts_with(in == "/" ? in : in + "/");
    PHASOR_CHECK(!inside, command, ": ", what, " '", dir, "' is inside the ", flag, " '", path,
                 "' it reads; its own output would become its input (write it elsewhere)");
  }
}

bool is_run_folder(const std::string& dir) { return is_regular(fs::path(dir) / "latest") || is_regular(fs::path(dir) / "log.jsonl"); }

void refuse_output_in_run(std::string_view command, std::string_view what, const std::string& out) {
  const fs::path path = canonical_or_self(out);
  const fs::path folder = path.parent_path(), grandparent = folder.parent_path();
  const std::string name = path.filename().string(), folder_name = folder.filename().string();
  static constexpr std::array<std::string_view, 5> kRunFiles = {"latest", "log.jsonl", "config.json", "validation.txt", "result.json"};
  if (is_run_folder(folder.string()) &&
      (std::find(kRunFiles.begin(), kRunFiles.end(), name) != kRunFiles.end() || name.starts_with("ckpt-")))
    refuse(command, what, out, "'" + name + "' of the training run in '" + folder.string() + "'");
  if (folder_name.starts_with("ckpt-") && is_run_folder(grandparent.string()))
    refuse(command, what, out, "a file of the checkpoint '" + folder.string() + "'");
  static constexpr std::array<std::string_view, 4> kSweepFiles = {"plan.json", "throughput.json", "report.md", "cells"};
  if (is_sweep_folder(folder) && std::find(kSweepFiles.begin(), kSweepFiles.end(), name) != kSweepFiles.end())
    refuse(command, what, out, "'" + name + "' of the sweep in '" + folder.string() + "'");
  if (folder_name == "cells" && is_sweep_folder(grandparent))
    refuse(command, what, out, "a cell of the sweep in '" + grandparent.string() + "'");
}

void check_output_path(std::string_view command, std::string_view what, const std::string& out, const std::vector<NamedInput>& inputs) {
  refuse_output_over_inputs(command, what, out, inputs);
  refuse_output_in_run(command, what, out);
}

}  // namespace phasor
