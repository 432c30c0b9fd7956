; The gfx11/gfx12 form of ../reverse_shared.c: each block of dst is its block of src reversed, through
; LDS: every work-item stores its word, the workgroup meets at a barrier, then each reads its mirror.
; Blocks of up to 256 work-items (1 KiB of LDS).
target triple = "amdgcn-amd-amdhsa"

@staged = internal addrspace(3) global [256 x i32] poison, align 4

declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.barrier()

define amdgpu_kernel void @reverse_shared(ptr addrspace(1) noalias %dst, ptr addrspace(1) noalias %src) #0 {
entry:
  %d = call ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
  %bx.p = getelementptr inbounds i8, ptr addrspace(4) %d, i64 4
  %bx16 = load i16, ptr addrspace(4) %bx.p, align 4
  %n = zext i16 %bx16 to i32
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %base = mul i32 %g, %n
  %x = add i32 %base, %t
  %x64 = zext i32 %x to i64
  %ps = getelementptr inbounds i32, ptr addrspace(1) %src, i64 %x64
  %v = load i32, ptr addrspace(1) %ps, align 4
  %t64 = zext i32 %t to i64
  %pl = getelementptr inbounds [256 x i32], ptr addrspace(3) @staged, i64 0, i64 %t64
  store i32 %v, ptr addrspace(3) %pl, align 4
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %nm1 = sub i32 %n, 1
  %m = sub i32 %nm1, %t
  %m64 = zext i32 %m to i64
  %pm = getelementptr inbounds [256 x i32], ptr addrspace(3) @staged, i64 0, i64 %m64
  %w = load i32, ptr addrspace(3) %pm, align 4
  %pd = getelementptr inbounds i32, ptr addrspace(1) %dst, i64 %x64
  store i32 %w, ptr addrspace(1) %pd, align 4
  ret void
}

attributes #0 = { nounwind convergent "amdgpu-flat-work-group-size"="1,256" "amdgpu-no-implicitarg-ptr" "amdgpu-no-dispatch-id"
                  "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr" "amdgpu-no-multigrid-sync-arg"
                  "amdgpu-no-default-queue" "amdgpu-no-completion-action" "amdgpu-no-lds-kernel-id"
                  "amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z" "amdgpu-no-workitem-id-y" "amdgpu-no-workitem-id-z" }
