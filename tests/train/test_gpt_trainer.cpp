// The GPT as people train it (recipes/gpt_tiny.yaml: AdamW, warm-up then cosine, clipping) end to
// end on the generated toy-grammar corpus: it learns (validation perplexity far below the
// unigram's), resumes bit for bit in the middle of an epoch (a GPT carries no state between
// segments), generates from its checkpoint, and a segment longer than its context is an error
// naming the keys.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/octet.h"
#include "data/toy_grammar.h"
#include "tests/data/temp_dir.h"
#include "tests/train/octet_process.h"
#include "tests/train/run_util.h"
#include "tools/cli/generate.h"
#include "tools/train/checkpoint.h"
#include "tools/train/lm_task.h"
#include "tools/train/recipe.h"
#include "tools/train/run.h"
#include "tools/train/trainer.h"

namespace octet::train {
namespace {

using octet::testing::TempDir;

const std::string kRecipes = std::string(OCTET_TESTS_DIR) + "/../recipes/";

// 30k training tokens: 30 segments of 16 x 64 (the last shorter) per epoch.
const ToyGrammarOptions kCorpus = ToyGrammarOptions().train_tokens(30000).valid_tokens(4000).test_tokens(4000);

Recipe gpt_recipe(const TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"data.dataset=text",  "data.root=" + dir.path() + "/toy",
                                "model.embed_dim=32", "train.epochs=3",
                                "log.every_steps=1",  "log.progress=false",
                                "train.threads=1",    "checkpoint.dir=" + dir.path() + "/runs"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_recipe(kRecipes + "gpt_tiny.yaml", o);
}

TEST(GptTrainer, LearnsAndGenerates) {
  TempDir dir;
  write_toy_grammar(dir.path() + "/toy", kCorpus);
  TrainResult r = train(gpt_recipe(dir), {});
  const auto valid = records_of(r.run_dir, "valid");
  ASSERT_EQ(valid.size(), 3u);
  const double ppl = valid.back()["ppl"].get<double>();
  std::printf("toy grammar, gpt: validation perplexity after 3 epochs %.2f\n", ppl);
  EXPECT_LT(ppl, 70.0);  // measured 57.8; the unigram's is ~120 on this corpus (test_lm_trainer.cpp)
  const auto train_recs = records_of(r.run_dir, "train");
  EXPECT_LT(train_recs.back()["loss"].get<double>(), train_recs.front()["loss"].get<double>());
  const cli::GenerateResult g =
      cli::generate_text(r.run_dir + "/best.safetensors", cli::GenerateOptions().prompt("the dogs").tokens(12));
  EXPECT_EQ(g.ids.size(), 12u);
  EXPECT_EQ(g.text.rfind("the dogs", 0), 0u) << g.text;
  // The key/value cache samples the text a full pass per token samples, past context_length (64)
  // too, where the window is read again; top_k 1 and a tiny top_p are the greedy choice.
  const std::string best = r.run_dir + "/best.safetensors";
  const auto sample = [&](cli::GenerateOptions o) { return cli::generate_text(best, o.prompt("the dogs")).ids; };
  const auto o = cli::GenerateOptions().tokens(90).temperature(0.9).seed(5);
  EXPECT_EQ(sample(o), sample(cli::GenerateOptions(o).kv_cache(false)));
  EXPECT_EQ(sample(cli::GenerateOptions(o).top_k(5).top_p(0.8)),
            sample(cli::GenerateOptions(o).top_k(5).top_p(0.8).kv_cache(false)));
  const auto greedy = sample(cli::GenerateOptions(o).temperature(0));
  EXPECT_EQ(sample(cli::GenerateOptions(o).top_k(1)), greedy);
  EXPECT_EQ(sample(cli::GenerateOptions(o).top_p(1e-9)), greedy);
  EXPECT_NE(sample(o), greedy);  // sampling at 0.9 is not the greedy text
  EXPECT_THROW(sample(cli::GenerateOptions(o).top_p(0)), Error);
  EXPECT_THROW(sample(cli::GenerateOptions(o).top_k(-1)), Error);
  // Through the binary, as the README writes it.
  const std::vector<std::string> args = {"generate", best, "--prompt", "the dogs", "--tokens",      "20",
                                         "--top-k",  "3",  "--top-p",  "0.9",      "--temperature", "0.8",
                                         "--seed",   "2"};
  const OctetRun cached = run_octet(args);
  std::vector<std::string> full_pass = args;
  full_pass.push_back("--no-kv-cache");
  const OctetRun uncached = run_octet(full_pass);
  EXPECT_EQ(cached.status, 0) << cached.output;
  EXPECT_EQ(cached.output.rfind("the dogs", 0), 0u) << cached.output;
  EXPECT_EQ(cached.output, uncached.output);
  std::vector<std::string> bad = args;
  bad[9] = "1.5";  // --top-p
  EXPECT_EQ(run_octet(bad).status, 2);  // a usage error, whichever check finds it
  bad[9] = "0";
  const OctetRun zero_p = run_octet(bad);
  EXPECT_EQ(zero_p.status, 2) << zero_p.output;
  expect_output(zero_p, "generate --top-p: expected in (0, 1], got 0");
  // Decoding through PrecisionBatching's kernels (every Linear but lm_head), cached or not.
  const auto pb = cli::GenerateOptions(o).pbatch("w=8,a=16");
  const auto pb_ids = sample(pb);
  EXPECT_EQ(pb_ids.size(), 90u);
  EXPECT_EQ(pb_ids, sample(cli::GenerateOptions(pb).kv_cache(false)));
  std::vector<std::string> pb_args = args;
  pb_args.insert(pb_args.end(), {"--pbatch", "w=4,a=16"});
  const OctetRun pb_run = run_octet(pb_args);
  EXPECT_EQ(pb_run.status, 0) << pb_run.output;
  expect_output(pb_run, "quantized inference: transformer.h.0.attn.c_attn: w4a16");
  pb_args.insert(pb_args.end(), {"--int8"});
  EXPECT_NE(run_octet(pb_args).status, 0);  // --pbatch and --int8 together
}

// Stopped in the middle of epoch 2, then resumed: the same losses and learning rates bit for bit
// (dropout draws and the warm-up/cosine schedule from the checkpoint; no state between segments),
// in f32 and in bf16 mixed precision (train.precision: the checkpoint keeps the f32 weights).
void expect_resumes_exactly(const std::vector<std::string>& keys) {
  TempDir dir;
  write_toy_grammar(dir.path() + "/toy", kCorpus);
  const auto recipe = [&](std::vector<std::string> o) {
    o.insert(o.end(), keys.begin(), keys.end());
    return gpt_recipe(dir, o);
  };
  TrainResult full = train(recipe({"log.run_name=full", "train.epochs=2"}), {});
  const auto want = records_of(full.run_dir, "train");
  ASSERT_EQ(want.size(), 2u * 30u);
  TrainResult part = train(recipe({"log.run_name=part", "train.epochs=2", "train.max_steps=40"}), {});
  ASSERT_TRUE(part.stopped);
  for (const auto& [name, t] : load_checkpoint(part.run_dir + "/last.safetensors").model)
    EXPECT_EQ(t.dtype(), DType::f32) << name;
  EXPECT_TRUE(load_checkpoint(part.run_dir + "/last.safetensors").task.empty());  // nothing carried
  TrainResult rest = Run::resume(part.run_dir, {"train.max_steps=0"}).fit();
  const auto got = records_of(part.run_dir, "train");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i]["loss"].get<double>(), want[i]["loss"].get<double>()) << "record " << i;
    EXPECT_EQ(got[i]["lr"], want[i]["lr"]) << "record " << i;
  }
  EXPECT_EQ(rest.final_test.loss, full.final_test.loss);
}

TEST(GptTrainer, ResumesInTheMiddleOfAnEpochExactly) { expect_resumes_exactly({}); }
TEST(GptTrainer, ResumesInTheMiddleOfAnEpochExactlyInBf16) { expect_resumes_exactly({"train.precision=bf16"}); }
// INT8 Linear layers: the DSGC schedule (a search every 7 backward passes: the stop at 40 falls
// inside a period) and the stochastic-rounding draws continue from the checkpoint's layer stats.
TEST(GptTrainer, ResumesInTheMiddleOfAnEpochExactlyWithInt8Linear) {
  expect_resumes_exactly({"quant.int8_linear=true", "quant.clip_update_period=7"});
}

// quant.int8_linear: every block's QKV, output and MLP projections train in INT8 (the embeddings,
// final norm and LM head float), through the binary as the README writes it; the run learns close
// to the float run, logs each INT8 layer's d_c and clips, keeps their stats in the checkpoint, and
// the checkpoint evaluates through its INT8 layers to the run's own final numbers.
TEST(GptTrainer, Int8LinearLayersTrainThroughTheBinary) {
  TempDir dir;
  write_toy_grammar(dir.path() + "/toy", kCorpus);
  const double f32 = records_of(train(gpt_recipe(dir, {"log.run_name=f32"}), {}).run_dir, "valid").back()["ppl"];
  const std::vector<std::string> args = {"train",
                                         kRecipes + "gpt_tiny.yaml",
                                         "data.dataset=text",
                                         "data.root=" + dir.path() + "/toy",
                                         "model.embed_dim=32",
                                         "train.epochs=3",
                                         "log.every_steps=10",
                                         "log.progress=false",
                                         "train.threads=1",
                                         "checkpoint.dir=" + dir.path() + "/runs",
                                         "log.run_name=int8",
                                         "quant.int8_linear=true"};
  const OctetRun r = run_octet(args);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string run = dir.path() + "/runs/int8";
  const std::string log = file_text(run + "/train.log");
  EXPECT_NE(log.find("INT8 training of 8 layers (transformer.h.0.attn.c_attn, transformer.h.0.attn.c_proj, "
                     "transformer.h.0.mlp.c_fc, transformer.h.0.mlp.c_proj, transformer.h.1.attn.c_attn"),
            std::string::npos)
      << log;
  const double int8 = records_of(run, "valid").back()["ppl"];
  std::printf("toy grammar, gpt: validation perplexity after 3 epochs f32 %.3f, INT8 Linear layers %.3f\n", f32, int8);
  EXPECT_LT(std::abs(int8 - f32) / f32, 0.05);
  const auto stats = records_of(run, "int8");
  ASSERT_FALSE(stats.empty());
  for (const char* stat : {"cos_distance", "grad_clip", "input_clip", "weight_clip", "lr_scale"}) {
    const std::string key = std::string("transformer.h.1.mlp.c_proj.") + stat;
    ASSERT_TRUE(stats.back().contains(key) && stats.back()[key].is_number()) << key << ": " << stats.back().dump();
  }
  EXPECT_FALSE(stats.back().contains("lm_head.cos_distance"));
  const std::string page = file_text(run + "/curves.html");  // the d_c heat map and per-layer charts
  EXPECT_NE(page.find("gradient cosine distance d_c of the 8 INT8 layers"), std::string::npos);
  const Checkpoint c = load_checkpoint(run + "/last.safetensors");
  EXPECT_EQ(c.int8.size(), 8u * 7u);  // seven stats per layer
  // The run's final test evaluation is of best.safetensors.
  const std::vector<EvalResult> evals = evaluate_checkpoint_splits(run + "/best.safetensors", "", 1);
  ASSERT_FALSE(evals.empty());
  EXPECT_EQ(evals.back().split, "test");
  EXPECT_NEAR(evals.back().loss, records_of(run, "test").back()["loss"].get<double>(), 1e-9);
  // A model without Linear layers to convert: an error naming the key, exit status 2 or 1, no crash.
  std::vector<std::string> bad = args;
  bad.back() = "quant.keep_first_last_float=false";
  bad.push_back("quant.int8_conv=true");
  const OctetRun refused = run_octet(bad);
  EXPECT_NE(refused.status, 0);
  expect_output(refused, "recipe quant.int8_conv: cannot train model 'gpt' in INT8");
}

// bf16 mixed precision learns as f32 does: the same recipe, validation perplexity within 3%.
TEST(GptTrainer, Bf16LearnsAsF32Does) {
  TempDir dir;
  write_toy_grammar(dir.path() + "/toy", kCorpus);
  const double f32 = records_of(train(gpt_recipe(dir, {"log.run_name=f32"}), {}).run_dir, "valid").back()["ppl"];
  const double bf16 =
      records_of(train(gpt_recipe(dir, {"log.run_name=bf16", "train.precision=bf16"}), {}).run_dir, "valid")
          .back()["ppl"];
  std::printf("toy grammar, gpt: validation perplexity after 3 epochs f32 %.3f, bf16 %.3f\n", f32, bf16);
  EXPECT_LT(std::abs(bf16 - f32) / f32, 0.03);
}

// The 8-bit optimizer paper's claim on a transformer, at small scale: 8-bit AdamW with a
// StableEmbedding ends close to 32-bit AdamW's validation perplexity (the same seed and steps), with
// about a quarter of the optimizer state; 8-bit with a plain embedding (the ablation) is reported.
// Small blocks and no 32-bit floor for small tensors, so that most of the state is 8-bit.
TEST(GptTrainer, EightBitAdamWTracks32Bit) {
  TempDir dir;
  write_toy_grammar(dir.path() + "/toy", kCorpus);
  auto run = [&](const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"log.run_name=" + name, "log.every_steps=50", "optimizer.min_8bit_size=0",
                               "optimizer.block_size=64"});
    return train(gpt_recipe(dir, extra), {});
  };
  const TrainResult fp32 = run("adamw32", {"model.embedding=stable", "optimizer.state_bits=32"});
  const TrainResult stable8 = run("adamw8_stable", {"model.embedding=stable", "optimizer.state_bits=8"});
  const TrainResult plain8 = run("adamw8_plain", {"model.embedding=plain", "optimizer.state_bits=8"});
  const double p32 = fp32.last_eval.perplexity(), p8 = stable8.last_eval.perplexity();
  std::printf(
      "gpt, validation perplexity after 3 epochs: 32-bit AdamW + StableEmbedding %.3f, 8-bit %.3f (%+.2f%%), "
      "8-bit + plain embedding %.3f\n",
      p32, p8, 100 * (p8 / p32 - 1), plain8.last_eval.perplexity());
  EXPECT_LT(std::abs(p8 / p32 - 1), 0.03);
  EXPECT_TRUE(std::isfinite(plain8.last_eval.perplexity()));
}

// data.tokenizer: bpe: the codec is learned from the training split, its merges travel in the
// checkpoint, and evaluation and generation need nothing else (the corpus folder gone); the text
// generated from a prompt starts with the prompt's bytes, and a resumed run reads the same ids.
TEST(GptTrainer, TrainsOnBpeTokensAndGeneratesFromTheCheckpointAlone) {
  TempDir dir;
  write_toy_grammar(dir.path() + "/toy", kCorpus);
  TrainResult r = train(gpt_recipe(dir, {"data.tokenizer=bpe", "data.vocab_size=400", "train.epochs=2"}), {});
  const Checkpoint ckpt = load_checkpoint(r.run_dir + "/best.safetensors");
  const Vocabulary vocab = checkpoint_vocabulary(ckpt);
  ASSERT_NE(vocab.bpe(), nullptr);
  EXPECT_EQ(vocab.size(), 400);
  const auto train_recs = records_of(r.run_dir, "train");
  EXPECT_LT(train_recs.back()["loss"].get<double>(), train_recs.front()["loss"].get<double>() - 1.0);
  std::filesystem::remove_all(dir.path() + "/toy");
  const cli::GenerateResult g =
      cli::generate_text(r.run_dir + "/best.safetensors", cli::GenerateOptions().prompt("the dogs").tokens(20));
  EXPECT_EQ(g.ids.size(), 20u);
  EXPECT_EQ(g.text.rfind("the dogs", 0), 0u) << g.text;
  std::string decoded;
  for (int64_t id : g.ids) decoded += vocab.token(id);
  EXPECT_EQ(g.text, "the dogs" + decoded);
  // Evaluation reads the corpus with the checkpoint's codec; a recipe asking for words cannot.
  write_toy_grammar(dir.path() + "/toy", kCorpus);
  const std::vector<EvalResult> evals = evaluate_checkpoint_splits(r.run_dir + "/best.safetensors", "", 1);
  ASSERT_FALSE(evals.empty());
  EXPECT_TRUE(std::isfinite(evals.back().loss));
  EXPECT_THROW(load_recipe_corpus(gpt_recipe(dir, {"data.tokenizer=word"}), &vocab, false), Error);
}

TEST(GptTrainer, ASegmentLongerThanTheContextIsAnError) {
  TempDir dir;
  write_toy_grammar(dir.path() + "/toy", kCorpus);
  try {
    train(gpt_recipe(dir, {"data.bptt=65"}), {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("data.bptt"), std::string::npos) << m;
    EXPECT_NE(m.find("model.context_length 64"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace octet::train
