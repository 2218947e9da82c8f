// Class folders of text or audio (aclImdb's train/pos/*.txt, Speech
// Commands' yes/*.wav) where prep is given them for a dataset: prep reads
// images, so they are named, with the granary.write call that writes them
// (text as str fields, 16-bit WAV clips as int16 arrays of any length).
#pragma once

#include <string>

namespace granary {

// The refusal of the folder `raw` where its class folders (RAW/<class>/,
// or RAW/train/<class>/ beside val/ and test/ in the splits layout) hold
// text (.txt) or audio (.wav, .flac, .mp3, .ogg, .opus, .m4a) and no image:
// what they hold, and the Python that writes them to `db` ("db" where
// empty): a split each, a folder named like unlabelled data (aclImdb's
// unsup/) or starting with '_' (Speech Commands' _background_noise_/) left
// out, and Speech Commands' validation_list.txt and testing_list.txt
// taken as its val and test splits. "" where `raw` is no such folder.
std::string OtherMediaAdvice(const std::string& raw, const std::string& db);

}  // namespace granary
