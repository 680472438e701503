// The data API in one include: datasets, transforms, the DataLoader and its device prefetcher.
// Fetching a dataset (downloads, archives, checksums, ImageNet's devkit) is data/fetch/fetch.h, a
// library of its own (octet::fetch), so the core library links no curl or libarchive.
//   auto train = cifar10("/data/cifar10", true, compose({random_crop(32, 32, 4), random_horizontal_flip()}));
//   DataLoader loader(train, DataLoaderOptions().batch_size(128).seed(1));
//   TextCorpus lm = load_text_corpus("data/wikitext-2", TextLevel::word);   // language modeling
#pragma once

#include "data/cifar10.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "data/mnist.h"
#include "data/prefetch.h"
#include "data/text.h"
#include "data/toy_grammar.h"
#include "data/transforms.h"
