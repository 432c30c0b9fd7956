; The gfx11/gfx12 form of ../count_items.c: every work-item of a launch of up to three dimensions
; writes `value` at out[(z * pitch_y + y) * pitch_x + x], (x, y, z) = workgroup id * block + work-item
; id. The block's three widths come from the dispatch packet (hsa_kernel_dispatch_packet_t
; workgroup_size_x/y/z, u16s at bytes 4, 6 and 8: HSA runtime hsa.h); the work-item ids arrive packed
; in v0 and the workgroup ids in SGPRs, as the descriptor's enable bits ask.
target triple = "amdgcn-amd-amdhsa"

declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workgroup.id.y()
declare i32 @llvm.amdgcn.workgroup.id.z()
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workitem.id.y()
declare i32 @llvm.amdgcn.workitem.id.z()

define amdgpu_kernel void @count_items(ptr addrspace(1) noalias %out, i32 %pitch_x, i32 %pitch_y, i32 %value) #0 {
entry:
  %d = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %bx.p = getelementptr inbounds i8, ptr addrspace(4) %d, i64 4
  %by.p = getelementptr inbounds i8, ptr addrspace(4) %d, i64 6
  %bz.p = getelementptr inbounds i8, ptr addrspace(4) %d, i64 8
  %bx16 = load i16, ptr addrspace(4) %bx.p, align 4
  %by16 = load i16, ptr addrspace(4) %by.p, align 2
  %bz16 = load i16, ptr addrspace(4) %bz.p, align 4
  %bx = zext i16 %bx16 to i32
  %by = zext i16 %by16 to i32
  %bz = zext i16 %bz16 to i32
  %gx = call i32 @llvm.amdgcn.workgroup.id.x()
  %gy = call i32 @llvm.amdgcn.workgroup.id.y()
  %gz = call i32 @llvm.amdgcn.workgroup.id.z()
  %tx = call i32 @llvm.amdgcn.workitem.id.x()
  %ty = call i32 @llvm.amdgcn.workitem.id.y()
  %tz = call i32 @llvm.amdgcn.workitem.id.z()
  %x0 = mul i32 %gx, %bx
  %x = add i32 %x0, %tx
  %y0 = mul i32 %gy, %by
  %y = add i32 %y0, %ty
  %z0 = mul i32 %gz, %bz
  %z = add i32 %z0, %tz
  %zy = mul i32 %z, %pitch_y
  %row = add i32 %zy, %y
  %rx = mul i32 %row, %pitch_x
  %i = add i32 %rx, %x
  %i64 = zext i32 %i to i64
  %p = getelementptr inbounds i32, ptr addrspace(1) %out, i64 %i64
  store i32 %value, ptr addrspace(1) %p, align 4
  ret void
}

attributes #0 = { nounwind "amdgpu-flat-work-group-size"="1,1024" "amdgpu-no-implicitarg-ptr" "amdgpu-no-dispatch-id"
                  "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr" "amdgpu-no-multigrid-sync-arg"
                  "amdgpu-no-default-queue" "amdgpu-no-completion-action" "amdgpu-no-lds-kernel-id" }
