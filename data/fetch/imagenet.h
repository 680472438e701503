// ImageNet (ILSVRC2012) cannot be downloaded by octet (its licence asks each user to sign up at
// image-net.org), but its validation images come as one flat tar, ILSVRC2012_img_val.tar. This sorts
// them into one folder per class, the layout data/image_folder.h (and torchvision's ImageFolder)
// reads: ROOT/val/<wnid>/ILSVRC2012_val_00000001.JPEG. The classes come from the devkit
// (ILSVRC2012_devkit_t12.tar.gz, or that archive unpacked): data/ILSVRC2012_validation_ground_truth.txt
// gives the ILSVRC2012_ID (1..1000) of each validation image in order, data/meta.mat's `synsets`
// struct array maps an ILSVRC2012_ID to its WordNet id (WNID).
//   int64_t n = prepare_imagenet_val("ILSVRC2012_img_val.tar", "ILSVRC2012_devkit_t12.tar.gz", "data/imagenet");
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace octet {

struct ImagenetDevkit {
  std::map<int64_t, std::string> wnid;  // ILSVRC2012_ID -> WNID ("n01440764")
  std::vector<int64_t> val_labels;      // the ILSVRC2012_ID of validation image 1, 2, ...
};

// Reads the devkit: a tar(.gz) or the folder it unpacks to.
ImagenetDevkit read_imagenet_devkit(const std::string& devkit);

// Sorts the validation tar's images into ROOT/val/<wnid>/ (each file written atomically); returns the
// number of images. Every image the ground truth lists must be in the tar.
int64_t prepare_imagenet_val(const std::string& val_tar, const std::string& devkit, const std::string& root);

}  // namespace octet
