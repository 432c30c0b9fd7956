; The gfx11/gfx12 form of ../fill.c: dst[i] = value for i < n; and copy_words, the one-thread kernel.
; One work-item per element, i = workgroup id * block width + work-item id, the block width read
; from the dispatch packet (hsa_kernel_dispatch_packet_t.workgroup_size_x, a u16 at byte 4: HSA
; runtime hsa.h), so any block the launch names works.
target triple = "amdgcn-amd-amdhsa"

declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workitem.id.x()

define amdgpu_kernel void @fill(ptr addrspace(1) noalias %dst, i32 %n, i32 %value) #0 {
entry:
  %d = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %bx.p = getelementptr inbounds i8, ptr addrspace(4) %d, i64 4
  %bx16 = load i16, ptr addrspace(4) %bx.p, align 4
  %bx = zext i16 %bx16 to i32
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %base = mul i32 %g, %bx
  %x = add i32 %base, %t
  %in = icmp ult i32 %x, %n
  br i1 %in, label %store, label %done
store:
  %x64 = zext i32 %x to i64
  %p = getelementptr inbounds i32, ptr addrspace(1) %dst, i64 %x64
  store i32 %value, ptr addrspace(1) %p, align 4
  br label %done
done:
  ret void
}

define amdgpu_kernel void @copy_words(ptr addrspace(1) noalias %dst, ptr addrspace(1) noalias %src, i32 %n) #1 {
entry:
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %in = icmp ult i32 %g, %n
  br i1 %in, label %copy, label %done
copy:
  %x64 = zext i32 %g to i64
  %s = getelementptr inbounds i32, ptr addrspace(1) %src, i64 %x64
  %v = load i32, ptr addrspace(1) %s, align 4
  %p = getelementptr inbounds i32, ptr addrspace(1) %dst, i64 %x64
  store i32 %v, ptr addrspace(1) %p, align 4
  br label %done
done:
  ret void
}

; Only the inputs a kernel uses: no hidden (implicit) arguments, no queue pointer or dispatch id
; (the AM dispatch loads the dispatch and kernarg pointers only: drivers/am/pm4.cpp).
attributes #0 = { nounwind "amdgpu-flat-work-group-size"="1,1024" "amdgpu-no-implicitarg-ptr" "amdgpu-no-dispatch-id"
                  "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr" "amdgpu-no-multigrid-sync-arg"
                  "amdgpu-no-default-queue" "amdgpu-no-completion-action" "amdgpu-no-lds-kernel-id"
                  "amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z" "amdgpu-no-workitem-id-y" "amdgpu-no-workitem-id-z" }
; copy_words: one work-item per workgroup (max_threads 1, as the C form says), so group id = index.
attributes #1 = { nounwind "amdgpu-flat-work-group-size"="1,1" "amdgpu-no-dispatch-ptr" "amdgpu-no-implicitarg-ptr" "amdgpu-no-dispatch-id"
                  "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr" "amdgpu-no-multigrid-sync-arg"
                  "amdgpu-no-default-queue" "amdgpu-no-completion-action" "amdgpu-no-lds-kernel-id"
                  "amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z" "amdgpu-no-workitem-id-y" "amdgpu-no-workitem-id-z" }
