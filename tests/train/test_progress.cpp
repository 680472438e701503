// The progress bar on a terminal (a pseudo-terminal here): a message printed while a bar is drawn
// part-way starts on a line of its own (end_line), and a bar not on a terminal draws nothing.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tools/train/progress.h"

namespace octet::train {
namespace {

// A pseudo-terminal: the bar draws on `out`, and what it drew is read back from the other side.
class Pty {
 public:
  Pty() {
    if (::openpty(&controller_, &device_, nullptr, nullptr, nullptr) != 0) return;
    ::fcntl(controller_, F_SETFL, O_NONBLOCK);
    out = ::fdopen(device_, "w");
  }
  ~Pty() {
    if (out) std::fclose(out);  // closes device_
    if (controller_ >= 0) ::close(controller_);
  }
  std::string drawn() {
    std::fflush(out);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(controller_, buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
    return text;
  }
  std::FILE* out = nullptr;

 private:
  int controller_ = -1, device_ = -1;
};

TEST(ProgressBar, EndLineEndsABarDrawnPartWay) {
  Pty tty;
  if (!tty.out) GTEST_SKIP() << "no pseudo-terminal";
  ProgressBar bar("epoch 1/1", 2, true, 1.0, "it", tty.out);
  bar.end_line();
  EXPECT_EQ(tty.drawn(), "");  // nothing drawn yet: nothing to end
  bar.update(2, "loss 1.0");   // the last step draws at once
  std::string text = tty.drawn();
  EXPECT_NE(text.find("epoch 1/1 [########################] 2/2 loss 1.0"), std::string::npos) << text;
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;  // the bar's line is open
  bar.end_line();
  text = tty.drawn();
  ASSERT_FALSE(text.empty());
  EXPECT_TRUE(text.back() == '\n') << text;  // a terminal may show '\n' as "\r\n"
  bar.end_line();
  EXPECT_EQ(tty.drawn(), "");  // once
  bar.finish("loss 1.0");      // a finished bar ends its own line
  text = tty.drawn();
  EXPECT_TRUE(!text.empty() && text.back() == '\n') << text;
  bar.end_line();
  EXPECT_EQ(tty.drawn(), "");
}

TEST(ProgressBar, NotOnATerminalDrawsNothing) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressBar bar("epoch 1/1", 1, true, 1.0, "it", file);
    bar.update(1, "loss 1.0");
    bar.end_line();
    bar.finish("loss 1.0");
  }
  EXPECT_EQ(std::ftell(file), 0);
  std::fclose(file);
}

}  // namespace
}  // namespace octet::train
