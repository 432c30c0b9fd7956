; The gfx11/gfx12 form of ../empty.c: `empty` does nothing, so what the launch benchmark measures is
; the queue; `bump` adds one to counter[0] (one work-item), so graph replays can check every kernel ran.
target triple = "amdgcn-amd-amdhsa"

define amdgpu_kernel void @empty() #0 {
  ret void
}

define amdgpu_kernel void @bump(ptr addrspace(1) noalias %counter) #1 {
  %v = load i32, ptr addrspace(1) %counter, align 4
  %n = add i32 %v, 1
  store i32 %n, ptr addrspace(1) %counter, align 4
  ret void
}

; No inputs beyond the arguments: no hidden (implicit) arguments, dispatch or queue pointer
; (drivers/am/pm4.cpp loads the kernarg pointer and, when asked, the dispatch pointer).
attributes #0 = { nounwind "amdgpu-flat-work-group-size"="1,1024" "amdgpu-no-dispatch-ptr" "amdgpu-no-implicitarg-ptr"
                  "amdgpu-no-dispatch-id" "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr"
                  "amdgpu-no-multigrid-sync-arg" "amdgpu-no-default-queue" "amdgpu-no-completion-action"
                  "amdgpu-no-lds-kernel-id" "amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z"
                  "amdgpu-no-workitem-id-y" "amdgpu-no-workitem-id-z" }
attributes #1 = { nounwind "amdgpu-flat-work-group-size"="1,1" "amdgpu-no-dispatch-ptr" "amdgpu-no-implicitarg-ptr"
                  "amdgpu-no-dispatch-id" "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr"
                  "amdgpu-no-multigrid-sync-arg" "amdgpu-no-default-queue" "amdgpu-no-completion-action"
                  "amdgpu-no-lds-kernel-id" "amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z"
                  "amdgpu-no-workitem-id-y" "amdgpu-no-workitem-id-z" }
