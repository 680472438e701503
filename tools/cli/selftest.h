// `octet selftest`: a tiny model forward/backward on the CPU, compared with float64 finite
// differences, then a few SGD steps; prints what it did. Returns 0 when everything matched.
#pragma once

namespace octet::cli {
int run_selftest(int threads);
}
