// `phasor info`: the config and parameter count of a checkpoint.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/command.h"
#include "models/model_io.h"
#include "models/transformer.h"

namespace phasor::cli {

namespace {

class Info final : public Command {
 public:
  Info() : Command("info", "print the config and parameter count of a checkpoint") {}

  void add_flags(Flags& flags) override {
    flags.checkpoint("checkpoint", checkpoint_);
    flags.flag("--json", json_, "print one JSON object, {\"config\": ..., \"parameters\": N}");
  }

  int run(const Flags&) override {  // the file alone, checked whole: no model is built
    const ModelFile file = read_model_file(checkpoint_);
    const int64_t parameters = parameter_count(file.config);
    if (json_)
      std::printf("%s\n", nlohmann::json{{"config", to_json(file.config)}, {"parameters", parameters}}.dump(2).c_str());
    else
      std::printf("%s\nparameters: %ld\n", to_json(file.config).dump(2).c_str(), static_cast<long>(parameters));
    return 0;
  }

 private:
  std::string checkpoint_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> info_command() { return std::make_unique<Info>(); }

}  // namespace phasor::cli
