// Fetching datasets, a component of its own (CMake target octet::fetch, <octet/fetch.h>): the
// downloader (download.h, libcurl: resume, checksums, mirrors), archives (archive.h, libarchive),
// MD5/SHA-256 (hash.h), the MAT-file reader (matlab.h) and the sorting of ImageNet's validation
// images by its devkit (imagenet.h). The core library (octet::octet) links none of it, nor curl or
// libarchive; the trainer (octet::train) and the `octet` CLI link it (data.download, `octet data`).
//   download_dataset(dataset_source("cifar10"), "data/cifar10");   // fetch, verify, unpack what is missing
//   auto data = cifar10("data/cifar10", true);                      // then read it with data/ (octet::octet)
//   prepare_imagenet_val("ILSVRC2012_img_val.tar", "ILSVRC2012_devkit_t12.tar.gz", "data/imagenet");
#pragma once

#include "data/fetch/archive.h"
#include "data/fetch/download.h"
#include "data/fetch/hash.h"
#include "data/fetch/imagenet.h"
#include "data/fetch/matlab.h"
