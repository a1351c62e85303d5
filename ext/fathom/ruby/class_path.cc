#include "class_path.h"

#include <cinttypes>
#include <cstdio>

namespace fathom {

std::string ClassPathWithoutAllocating(VALUE klass) {
  VALUE path = rb_class_path_cached(klass);
  if (RB_TYPE_P(path, T_STRING)) return std::string(RSTRING_PTR(path), static_cast<size_t>(RSTRING_LEN(path)));
  VALUE meta_path = rb_class_path_cached(rb_obj_class(klass));  // Class, or a Class subclass
  std::string name = "#<";
  if (RB_TYPE_P(meta_path, T_STRING))
    name.append(RSTRING_PTR(meta_path), static_cast<size_t>(RSTRING_LEN(meta_path)));
  else
    name += "Class";
  char buf[32];
  snprintf(buf, sizeof buf, ":0x%016" PRIxPTR ">", static_cast<uintptr_t>(klass));
  return name + buf;
}

}  // namespace fathom
