#pragma once
// What a command may write over. An output file (--out, a run's files) must not
// be one of the command's own inputs (the checkpoint it reads, its data, its
// config), nor a file of a training run or sweep the command does not own
// (`plot r --out r/latest` would replace the run's pointer to its checkpoint).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace phasor {

// An input of a command: the flag that names it (for the message) and its path.
using NamedInput = std::pair<std::string, std::string>;

// True when a and b name the same existing file (same device and inode, after
// symlinks), or the same path once made canonical.
bool same_file(const std::string& a, const std::string& b);

// Throws "<command>: <what> '<out>' is the <flag> it reads ('<path>'); write the
// output elsewhere" when `out` is one of `inputs` (inputs that do not exist
// are skipped: a built-in corpus name is no file).
void refuse_output_over_inputs(std::string_view command, std::string_view what, const std::string& out,
                               const std::vector<NamedInput>& inputs);

// A folder holding a training run (its `latest` pointer or its log.jsonl).
bool is_run_folder(const std::string& dir);

// Throws "<command>: <what> '<out>' would replace <the file> of the training
// run in '<dir>'; write the output elsewhere" when `out` is a file a training
// run or a sweep writes: a run folder's latest, log.jsonl, config.json,
// validation.txt, result.json or ckpt-* entry, any file of a checkpoint folder,
// a sweep folder's plan.json, throughput.json, report.md or cells/ entry.
void refuse_output_in_run(std::string_view command, std::string_view what, const std::string& out);

// Throws "<command>: <what> '<dir>' is inside the <flag> '<path>' it reads; its
// own output would become its input (write it elsewhere)" when the output folder
// `dir` is one of `inputs` or lies under one (a folder of text read whole), by any
// spelling: both are resolved (symlinks, "..", relative) as far as they exist.
// Inputs that do not exist are skipped (a built-in corpus name is no file).
void refuse_output_folder_in_inputs(std::string_view command, std::string_view what, const std::string& dir,
                                    const std::vector<NamedInput>& inputs);

// Both checks: what every command with an --out file calls before writing it.
void check_output_path(std::string_view command, std::string_view what, const std::string& out, const std::vector<NamedInput>& inputs);

}  // namespace phasor
