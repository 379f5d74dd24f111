// Attention maps (app/attention_map.h, `phasor attention`): the
// probabilities of one head equal a softmax computed here from
// Attention::scores (with 1/sqrt(d), the causal mask and ALiBi's bias), rows
// sum to 1, and the SVG draws one cell per non-zero probability.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "app/attention_map.h"
#include "app/svg.h"
#include "models/data/corpus.h"
#include "models/data/tokenizer.h"
#include "models/model_io.h"
#include "models/transformer.h"
#include "phasor.h"
#include "tests/helpers.h"

using namespace phasor;
using namespace phasor::test;
namespace fs = std::filesystem;

namespace {

ModelConfig tiny_config(Position position) {
  return model_config(position, {.d_model = 16, .n_layers = 2, .n_heads = 2, .d_ff = 32, .max_seq_len = 32, .cmha_init = CmhaInit::Paper});
}

// Larger weights than the initialisation's, so the maps are far from uniform.
std::unique_ptr<CausalLM> tiny_model(Position position) {
  auto model = std::make_unique<CausalLM>(tiny_config(position), 3);
  Generator gen(4);
  NoGradGuard no_grad;
  for (const auto& [name, p] : model->named_parameters())
    if (p.dim() == 2 && !name.ends_with(".delta") && !name.ends_with(".phase_bias"))
      ops::axpy_(p, normal(p.shape(), 0.0, 0.5, DType::Float32, &gen), 1.0);
  return model;
}

const Tensor& parameter(const CausalLM& model, const std::string& name) {
  static Tensor found;
  for (const auto& [n, p] : model.named_parameters())
    if (n == name) found = p;
  REQUIRE(found.defined());
  return found;
}

// Layer 0's map recomputed from the spec: x0 = E[tokens] (these variants add
// no absolute position), RMSNorm, the variant's scores, then a causal softmax.
std::vector<double> layer0_reference(const CausalLM& model, const std::vector<int64_t>& tokens, int64_t head) {
  NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(tokens.size());
  const ModelConfig& c = model.config();
  const Tensor x = embedding(parameter(model, "tok_emb.weight"), from_vector(tokens, {1, n}));
  const Tensor s = model.layers[0]->attn->scores(model.layers[0]->attn_norm->forward(x), 0);  // [1, H, N, N]
  const std::vector<double> scores = ops::contiguous(ops::select(ops::select(s, 0, 0), 0, head)).to_vector<double>();
  const double slope = c.position == Position::Alibi ? alibi_slopes(c.n_heads)[static_cast<size_t>(head)] : 0.0;
  std::vector<double> out(static_cast<size_t>(n * n), 0.0);
  for (int64_t m = 0; m < n; ++m) {
    double total = 0;
    for (int64_t k = 0; k <= m; ++k)
      total += out[m * n + k] = std::exp(scores[m * n + k] / std::sqrt(static_cast<double>(c.head_dim())) - slope * (m - k));
    for (int64_t k = 0; k <= m; ++k) out[m * n + k] /= total;
  }
  return out;
}

}  // namespace

TEST_CASE("attention_map gives the causal softmax of the head's exact scores, rows summing to 1") {
  const std::vector<int64_t> tokens = ByteTokenizer().encode("In the beginning God created");
  const auto n = static_cast<int64_t>(tokens.size());
  for (Position position : {Position::ComplexFormer, Position::Alibi, Position::Rope}) {
    CAPTURE(position);
    const auto model = tiny_model(position);
    for (int64_t head = 0; head < 2; ++head) {
      CAPTURE(head);
      const Tensor map = attention_map(*model, tokens, 0, head);
      REQUIRE(map.shape() == Dims({n, n}));
      const std::vector<double> a = map.to_vector<double>(), expected = layer0_reference(*model, tokens, head);
      double worst = 0, spread = 0;
      for (int64_t m = 0; m < n; ++m) {
        double row = 0;
        for (int64_t k = 0; k < n; ++k) {
          const double p = a[m * n + k];
          if (k > m) CHECK(p == 0.0);  // the future is masked
          if (k <= m) CHECK(p > 0.0);
          row += p;
          if (k <= m) worst = std::max(worst, std::abs(p - expected[m * n + k]) / expected[m * n + k]);
          spread = std::max(spread, std::abs(p - (k <= m ? 1.0 / static_cast<double>(m + 1) : 0.0)));
        }
        CHECK(row == doctest::Approx(1.0).epsilon(1e-6));
      }
      CHECK(worst <= 1e-5);  // relative: probabilities go down to 1e-11
      CHECK(spread > 0.05);  // not a uniform map, which a broken score would also sum to 1
    }
    // A deeper layer runs too, and is a different map.
    const Tensor deeper = attention_map(*model, tokens, 1, 0);
    CHECK(ops::all_finite(deeper));
  }
}

TEST_CASE("attention_map_svg draws one cell per non-zero probability, with the characters as labels") {
  const std::string text = "Let <there> be & light";
  const std::vector<int64_t> tokens = ByteTokenizer().encode(text);
  const auto n = static_cast<int64_t>(tokens.size());
  const auto model = tiny_model(Position::ComplexFormer);
  const std::string svg = attention_map_svg(attention_map(*model, tokens, 1, 1), tokens, "layer 1, head 1");
  CHECK(svg.starts_with("<svg"));
  CHECK(count_of(svg, "<rect class=\"cell\"") == static_cast<size_t>(n * (n + 1) / 2));
  CHECK(count_of(svg, "class=\"key-label\"") == static_cast<size_t>(n));
  CHECK(count_of(svg, "class=\"query-label\"") == static_cast<size_t>(n));
  CHECK(svg.find(">&lt;</text>") != std::string::npos);  // '<' escaped
  CHECK(svg.find(">&amp;</text>") != std::string::npos);
  CHECK(svg.find(">\u2423</text>") != std::string::npos);  // the space
  CHECK(count_of(svg, "<text") == count_of(svg, "</text>"));
  CHECK(svg.find("nan") == std::string::npos);
  // A masked cell is not drawn: a uniform-looking map with the mask missing would have n^2 cells.
  Tensor full = ones({n, n}, DType::Float64) / static_cast<double>(n);
  CHECK(count_of(attention_map_svg(full, tokens, "t"), "<rect class=\"cell\"") == static_cast<size_t>(n * n));
  CHECK(count_of(svg, "attention probability</text>") == 1);  // the colour bar says what it measures
  // 400 characters: too many to label each; the axes show positions at a round step instead.
  const std::vector<int64_t> long_text(400, 'a');
  const std::string wide = attention_map_svg(ones({400, 400}, DType::Float64) / 400.0, long_text, "t");
  CHECK(count_of(wide, "class=\"key-label\"") == 0);
  const size_t positions = count_of(wide, "class=\"key-position\"");
  CHECK(positions >= 8);  // every 20 or 50 positions, readable
  CHECK(positions <= 40);
  CHECK(wide.find(">0</text>") != std::string::npos);
  CHECK(wide.find("key position (attended to)") != std::string::npos);
  // 1200 positions: blocks of 3 x 3 (400 cells a side), each the mean of its attendable pairs.
  const int64_t long_n = 1200;
  std::vector<double> causal(static_cast<size_t>(long_n * long_n), 0.0);
  for (int64_t m = 0; m < long_n; ++m)
    for (int64_t k = 0; k <= m; ++k) causal[static_cast<size_t>(m * long_n + k)] = 1.0 / static_cast<double>(m + 1);
  const std::string pooled = attention_map_svg(from_vector(causal, {long_n, long_n}), std::vector<int64_t>(long_n, 'a'), "t");
  CHECK(count_of(pooled, "<rect class=\"cell\"") == static_cast<size_t>(400 * 401 / 2));
  CHECK(pooled.find("each cell 3 x 3 positions, their mean") != std::string::npos);
  // Block (1, 0): queries 3-5 to keys 0-2, all attendable: (3 x 1/4 + 3 x 1/5 + 3 x 1/6) / 9.
  const double mean_10 = (3.0 / 4 + 3.0 / 5 + 3.0 / 6) / 9;
  CHECK(pooled.find("queries 3-5 to keys 0-2: mean " + svg::fixed(mean_10, 4)) != std::string::npos);
  // The diagonal block (0, 0): its 6 attendable pairs only, (1 + 2 x 1/2 + 3 x 1/3) / 6.
  CHECK(pooled.find("queries 0-2 to keys 0-2: mean " + svg::fixed(3.0 / 6, 4)) != std::string::npos);
  CHECK(pooled.find(">1197</text>") == std::string::npos);  // positions label block starts
  CHECK(count_of(pooled, "class=\"key-position\"") >= 8);
  CHECK(token_label('\n') == "\u21b5");
  CHECK(token_label(0xe2) == "\\xe2");
}

TEST_CASE("phasor attention writes the map, and refuses a bad layer, head or text") {
  const fs::path dir = fresh_folder(scratch_root("attention_map", /*remove_at_exit=*/true) / "cli");
  const fs::path ckpt = dir / "model.safetensors", out = dir / "map.svg";
  save_model(ckpt.string(), *tiny_model(Position::ComplexFormer));
  const auto run = [&](const std::string& args) {
    const Cli r = run_shell(phasor_command() + " attention --checkpoint " + quote(ckpt) + " --out " + quote(out) + " " + args, dir);
    return std::pair{r.status, r.err};
  };
  int status = 0;
  std::string err;
  std::tie(status, err) = run("--text 'hello world' --layer 1 --head 0");
  INFO(err);
  REQUIRE(status == 0);
  const std::string from_text = read_text_file(out.string());
  CHECK(count_of(from_text, "<rect class=\"cell\"") == 11 * 12 / 2);
  fs::remove(out);
  // The same text from a file draws the same map.
  write_bytes(dir / "text.txt", "hello world");
  std::tie(status, err) = run("--text-file " + quote(dir / "text.txt") + " --layer 1 --head 0");
  REQUIRE_MESSAGE(status == 0, err);
  CHECK(read_text_file(out.string()) == from_text);
  fs::remove(out);
  // Past 512 positions the map is drawn in blocks.
  write_bytes(dir / "long.txt", sample_text(600));
  std::tie(status, err) = run("--text-file " + quote(dir / "long.txt") + " --layer 0 --head 1");
  REQUIRE_MESSAGE(status == 0, err);
  CHECK(read_text_file(out.string()).find("each cell 2 x 2 positions, their mean") != std::string::npos);
  fs::remove(out);
  for (const auto& refusal : std::vector<std::pair<std::string, std::string>>{
           {"--text hi --layer 2 --head 0", "attention: --layer 2 is out of range: the model has 2 layer(s)"},
           {"--text hi --layer 0 --head -1", "attention: --head -1 is out of range"},
           {"--text '' --layer 0 --head 0", "attention: --text is empty"},
           {"--layer 0 --head 0", "attention: give the text with one of --text and --text-file"},
           {"--text hi --text-file " + quote(dir / "text.txt") + " --layer 0 --head 0", "attention: give the text with one of"}}) {
    const std::string& args = refusal.first;
    const std::string& message = refusal.second;
    std::tie(status, err) = run(args);
    CAPTURE(args);
    CHECK(status == 1);
    CHECK_MESSAGE(err.starts_with("phasor: " + message), err);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(!fs::exists(out));
  }
  fs::remove_all(dir);
}
