// Ruby 3.4's "vm" root, given the shape Ruby 3.1–3.3 give it, so that a
// retention path reads the same on every Ruby for the same heap
// (docs/internals/retention.md, "The vm root on Ruby 3.4").
//
// What the roots report (rb_objspace_reachable_objects_from_root, which
// the in-process walk and ObjectSpace.dump_all's ROOT lines both use):
//
//  - 3.1–3.3 (vm.c rb_vm_mark): under "vm", the running Ractors, then
//    every object C code pinned (rb_gc_register_mark_object: each entry of
//    vm->mark_object_ary is a root of its own, Object among them), the load
//    path, the main object..., and last every class C code defined
//    (vm->defined_module_hash). Addresses registered with
//    rb_gc_register_address are a category of their own, "global_list".
//    So a constant reads `vm → Object → SessionStore → SESSIONS`.
//  - 3.4 (vm.c rb_vm_mark, rb_vm_register_global_object): defined_module_hash
//    is gone; C-defined classes are pinned like any object, in a chain of
//    hidden T_DATA buckets ("VM/pin_array_list", 1024 entries each, the
//    newest bucket first) that the vm root references once: the entries
//    are the bucket's references, a hop further down. And the registered
//    addresses moved into "vm", right after the Ractors. Walked as reported,
//    Object is two hops down, named by whichever vm root reaches it first:
//    `vm → in vm → Object` through the bucket, or `vm → Ractor → Object`
//    when a C extension registered a class's address (Fathom's own
//    registered classes did: Ractor's superclass is Object).
//
// ReshapeVmRoots undoes both moves: each bucket's entries become roots of
// "vm" where the bucket was (oldest first, each bucket before its entries,
// as 3.3 marks mark_object_ary), and the registered addresses a category
// "global_list" after "vm". Nothing is added or lost: every reported root
// stays a root, and every entry was reachable from "vm" already, so
// reachability, and what the super-root dominates, do not change; only
// which vm root names an object, and how many hops down it is.
//
// Pure: the caller says what an address is (the walk asks Ruby, the dump
// reader its records). Ruby 3.1–3.3 report no bucket, and a reshape needs
// one: their roots are left as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fathom {
namespace roots {

struct RootCategoryRefs {
  std::string name;
  std::vector<uint64_t> refs;  // addresses or indices: opaque here
};

// What ReshapeVmRoots needs to know about the objects the roots reference.
class VmRootsHeap {
 public:
  // One of the VM's buckets of pinned objects (a hidden T_DATA whose
  // type is "VM/pin_array_list").
  virtual bool IsPinnedObjectList(uint64_t ref) = 0;
  // A Ractor object (the vm root's first references).
  virtual bool IsRactor(uint64_t ref) = 0;
  // A bucket's references in marking order: the next (older) bucket,
  // then its entries, oldest first.
  virtual void BucketReferences(uint64_t bucket, std::vector<uint64_t>* out) = 0;

 protected:
  ~VmRootsHeap() = default;
};

struct VmRootsReshape {
  bool applied = false;       // a bucket was found under "vm"
  size_t buckets = 0;         // buckets made roots of "vm"
  size_t pinned_entries = 0;  // their entries made roots of "vm"
  size_t global_list = 0;     // registered addresses moved to "global_list"
};

// Reshapes *categories in place (see above). The categories keep their
// order; "global_list" is inserted right after "vm" when there are
// registered addresses (3.3 lists it after "vm" too, before "end_proc"
// and "global_tbl") and no such category exists yet. Buckets are followed
// at most once each (a damaged dump may loop).
VmRootsReshape ReshapeVmRoots(std::vector<RootCategoryRefs>* categories, VmRootsHeap& heap);

}  // namespace roots
}  // namespace fathom
