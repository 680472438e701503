// "Did you mean": the known word nearest a mistyped one, for the errors about recipe keys, their
// choices and the command line's subcommands. A word is suggested only when it is a likely typo
// (a few letters off, a swapped pair counting as one), never a guess at something else.
//   did_you_mean("model.nmu_classes", {"model.num_classes", "model.name"})  // "; did you mean 'model.num_classes'?"
//   did_you_mean("resnet999", {"resnet20", "resnet56"})                     // ""
#pragma once

#include <string>
#include <vector>

namespace octet::train {

// Edits (insert, delete, substitute a character, or swap two adjacent ones) that turn a into b:
// the optimal string alignment distance.
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate nearest `word` (the first of equals) when it is close enough to be what was meant:
// at most a quarter of the shorter word's letters off (one at least), and not every letter of `word`.
// Empty when none is.
std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates);
// "; did you mean 'x'?" for nearest_word's answer, or "" when there is none.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace octet::train
