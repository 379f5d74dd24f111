// `phasor attention`: one head's attention map for a text, as an SVG heat map.
#include <cstdio>
#include <string>
#include <vector>

#include "app/attention_map.h"
#include "app/cli/command.h"
#include "app/cli/scaling_flags.h"
#include "app/output_path.h"
#include "models/data/corpus.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "nn/atomic_file.h"
#include "tensor/error.h"

namespace phasor::cli {

namespace {

class Attention final : public Command {
 public:
  Attention() : Command("attention", "draw one head's attention map for a text as an SVG heat map") {}

  void add_flags(Flags& flags) override {
    flags.checkpoint("--checkpoint", checkpoint_);
    flags.option("--text", text_, "the text (one token per byte)");
    flags.option("--text-file", text_file_, "read the text from this file instead (one of --text and --text-file)");
    flags.option("--layer", layer_, "layer index, from 0").required();
    flags.option("--head", head_, "head index, from 0").required();
    flags.option("--out", out_, "output SVG file").required();
    scaling_.add(flags);
  }

  int run(const Flags& flags) override {
    PHASOR_CHECK(flags.count("--text") + flags.count("--text-file") == 1, "attention: give the text with one of --text and --text-file");
    check_output_path("attention", "--out", out_, {{"--checkpoint", checkpoint_}, {"--text-file", text_file_}});
    const std::string text = text_file_.empty() ? text_ : read_file_bytes(text_file_, 1u << 20, "1 MiB for an attention map's text");
    const auto model = load_model(checkpoint_);
    model->set_position_scaling(scaling_.over(model->position_scaling()));
    const std::vector<int64_t> ids = ByteTokenizer().encode(text);
    const Tensor map = attention_map(*model, ids, layer_, head_);
    const std::string title = "layer " + std::to_string(layer_) + ", head " + std::to_string(head_) + " (" +
                              std::string(position_name(model->config().position)) + ")";
    write_text_atomically(out_, attention_map_svg(map, ids, title));
    std::printf("wrote %s\n", out_.c_str());
    return 0;
  }

 private:
  ScalingFlags scaling_;
  std::string checkpoint_, text_, text_file_, out_;
  int64_t layer_ = 0, head_ = 0;
};

}  // namespace

std::unique_ptr<Command> attention_command() { return std::make_unique<Attention>(); }

}  // namespace phasor::cli
