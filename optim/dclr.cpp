#include "optim/dclr.h"

namespace octet {

void apply_dclr(Optimizer& opt, const std::vector<quant::Int8Module>& layers) {
  for (const quant::Int8Module& l : layers) {
    const double s = quant::dclr_scale(*l.layer);
    for (const std::string& p : l.params) opt.set_lr_scale(p, s);
  }
}

}  // namespace octet
