; The gfx11/gfx12 form of ../add_one.c: b[i] = a[i] + 1 for i < n, one work-item per element (the
; block width from the dispatch packet, as in fill.ll).
target triple = "amdgcn-amd-amdhsa"

declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workitem.id.x()

define amdgpu_kernel void @add_one(ptr addrspace(1) noalias %b, ptr addrspace(1) noalias %a, i32 %n) #0 {
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
  br i1 %in, label %body, label %done
body:
  %x64 = zext i32 %x to i64
  %pa = getelementptr inbounds float, ptr addrspace(1) %a, i64 %x64
  %va = load float, ptr addrspace(1) %pa, align 4
  %vb = fadd float %va, 1.0
  %pb = getelementptr inbounds float, ptr addrspace(1) %b, i64 %x64
  store float %vb, ptr addrspace(1) %pb, align 4
  br label %done
done:
  ret void
}

attributes #0 = { nounwind "amdgpu-flat-work-group-size"="1,1024" "amdgpu-no-implicitarg-ptr" "amdgpu-no-dispatch-id"
                  "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr" "amdgpu-no-multigrid-sync-arg"
                  "amdgpu-no-default-queue" "amdgpu-no-completion-action" "amdgpu-no-lds-kernel-id"
                  "amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z" "amdgpu-no-workitem-id-y" "amdgpu-no-workitem-id-z" }
