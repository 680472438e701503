// "Did you mean": the edit distance and when a known word is close enough to suggest.
#include <gtest/gtest.h>

#include "tools/train/suggest.h"

namespace octet::train {
namespace {

TEST(Suggest, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("train", "train"), 0u);
  EXPECT_EQ(edit_distance("trian", "train"), 1u);  // a swapped pair is one edit
  EXPECT_EQ(edit_distance("evl", "eval"), 1u);
  EXPECT_EQ(edit_distance("evall", "eval"), 1u);
  EXPECT_EQ(edit_distance("resnet2O", "resnet20"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("ab", "ba"), 1u);
  EXPECT_EQ(edit_distance("abc", "ca"), 3u);  // optimal string alignment: no edit of a swapped pair
}

TEST(Suggest, OnlyLikelyTyposAreSuggested) {
  const std::vector<std::string> commands = {"train", "eval", "export", "sweep", "generate", "inspect"};
  EXPECT_EQ(nearest_word("trian", commands), "train");
  EXPECT_EQ(nearest_word("evl", commands), "eval");
  EXPECT_EQ(nearest_word("inspcet", commands), "inspect");
  EXPECT_EQ(nearest_word("frobnicate", commands), "");
  EXPECT_EQ(nearest_word("train", commands), "");  // a known word needs no suggestion
  EXPECT_EQ(did_you_mean("model.nmu_classes", {"model.name", "model.num_classes"}),
            "; did you mean 'model.num_classes'?");
  EXPECT_EQ(did_you_mean("resnet999", {"resnet20", "resnet110", "resnet56"}), "");  // three letters off
  // A one-letter word is never "one edit" from another: C is not a typo of A.
  EXPECT_EQ(did_you_mean("C", {"A", "B"}), "");
  EXPECT_EQ(did_you_mean("x", {}), "");
}

}  // namespace
}  // namespace octet::train
