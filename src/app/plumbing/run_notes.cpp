#include "app/plumbing/run_notes.hpp"

namespace lw {

const char* record_kind_name(RecordKind k) {
  switch (k) {
#define LW_X(e, n)    \
  case RecordKind::e: \
    return n;
    LW_RECORD_KINDS(LW_X)
#undef LW_X
  }
  return "";
}

std::optional<RecordKind> note_kind(const nlohmann::json& note) {
  if (!note.is_object()) return std::nullopt;
  const auto it = note.find("kind");
  if (it == note.end() || !it->is_string()) return std::nullopt;
  const std::string& k = it->get_ref<const std::string&>();
#define LW_X(e, n) \
  if (k == n) return RecordKind::e;
  LW_RECORD_KINDS(LW_X)
#undef LW_X
  return std::nullopt;
}

void to_json(nlohmann::json& j, const TrainDoneNote& n) {
  j = {{"train", n.train}, {"start_mono", n.start_mono}, {"end_mono", n.end_mono}};
}

void from_json(const nlohmann::json& j, TrainDoneNote& n) {
  n.train = j.at("train").get<int>();
  if (j.contains("start_mono") || j.contains("end_mono")) {
    n.start_mono = j.at("start_mono").get<Nanos>();
    n.end_mono = j.at("end_mono").get<Nanos>();
  } else {
    n.start_mono = n.end_mono = 0;  // an older capacity record
  }
}

}  // namespace lw
