; The gfx11/gfx12 form of ../mix.c (the sequence fuzzer's kernel):
; dst[i] = (dst[i] * 2654435761) ^ src[i] ^ (k + i) for i < n, one work-item per element.
target triple = "amdgcn-amd-amdhsa"

declare ptr addrspace(4) @llvm.amdgcn.dispatch.ptr()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workitem.id.x()

; dst and src may be the same buffer (the fuzzer mixes a buffer into itself): no noalias.
define amdgpu_kernel void @mix(ptr addrspace(1) %dst, ptr addrspace(1) %src, i32 %n, i32 %k) #0 {
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
  %pd = getelementptr inbounds i32, ptr addrspace(1) %dst, i64 %x64
  %ps = getelementptr inbounds i32, ptr addrspace(1) %src, i64 %x64
  %vd = load i32, ptr addrspace(1) %pd, align 4
  %vs = load i32, ptr addrspace(1) %ps, align 4
  %m = mul i32 %vd, 2654435761
  %kx = add i32 %k, %x
  %r0 = xor i32 %m, %vs
  %r = xor i32 %r0, %kx
  store i32 %r, ptr addrspace(1) %pd, align 4
  br label %done
done:
  ret void
}

attributes #0 = { nounwind "amdgpu-flat-work-group-size"="1,1024" "amdgpu-no-implicitarg-ptr" "amdgpu-no-dispatch-id"
                  "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr" "amdgpu-no-multigrid-sync-arg"
                  "amdgpu-no-default-queue" "amdgpu-no-completion-action" "amdgpu-no-lds-kernel-id"
                  "amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z" "amdgpu-no-workitem-id-y" "amdgpu-no-workitem-id-z" }
