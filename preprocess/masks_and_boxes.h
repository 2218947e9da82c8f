// Image datasets whose labels are masks or boxes (segmentation, detection)
// as they are downloaded: images/ beside masks/ or labels/ of the same
// names, VOC's JPEGImages/ beside SegmentationClass/ and Annotations/, a
// YOLO .txt beside each image, a COCO annotation file, a table of boxes. Read as class
// folders, as torchvision's ImageFolder reads any folder, their classes
// would be "images" and "masks": a classifier telling photographs from
// their masks. prep builds classification dbs, so a build of one is
// refused, saying what it is and how granary.write writes it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace granary {

// What the files an image folder's walk found say of it (`images`: those
// taken as images, `others`: those left out, formats prep does not decode
// and files that are no images; all relative to `raw`), where they say
// masks or boxes: "a segmentation dataset: masks/ holds ..." (after "RAW:
// "); "" where they do not.
// The columns of a table's `header` that hold a box ("'xmin', 'ymin',
// 'xmax', 'ymax'": TensorFlow's object detection CSV, as Roboflow exports
// it; x1..y2; x, y, w, h; bbox); "" where none do.
std::string BoxColumnsIn(const std::vector<std::string>& header);

std::string MasksOrBoxesIn(const std::filesystem::path& raw, const std::vector<std::string>& images,
                           const std::vector<std::string>& others);

}  // namespace granary
