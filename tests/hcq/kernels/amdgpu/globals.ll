; The gfx11/gfx12 form of ../globals.c: a kernel that reads and writes data in its own code object —
; initialised data (.data), a read-only table (.rodata, read through the scalar cache) and zeroed
; data (.bss) — reached PC-relative (s_getpc_b64 and REL32 relocations ld.lld resolves), so the
; loader must place the whole image, zero-fill included. GPU code makes no library calls; the loop
; runs on one work-item. out[0..n) = table[i % 16] + offsets[i % 4] + staging[i], staging zeroed
; first, as in the C form.
target triple = "amdgcn-amd-amdhsa"

@offsets = hidden addrspace(1) global [4 x i32] [i32 1000, i32 2000, i32 3000, i32 4000], align 4
@table = internal addrspace(4) constant [16 x i32] [i32 3, i32 1, i32 4, i32 1, i32 5, i32 9, i32 2, i32 6,
                                                    i32 5, i32 3, i32 5, i32 8, i32 9, i32 7, i32 9, i32 3], align 4
@staging = hidden addrspace(1) global [64 x i32] zeroinitializer, align 4

define amdgpu_kernel void @globals(ptr addrspace(1) noalias %out, i32 %n) #0 {
entry:
  %small = icmp ult i32 %n, 64
  %count = select i1 %small, i32 %n, i32 64
  %any = icmp ne i32 %count, 0
  br i1 %any, label %loop, label %done
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %i64 = zext i32 %i to i64
  %ps = getelementptr inbounds [64 x i32], ptr addrspace(1) @staging, i64 0, i64 %i64
  store volatile i32 0, ptr addrspace(1) %ps, align 4
  %i16 = and i64 %i64, 15
  %pt = getelementptr inbounds [16 x i32], ptr addrspace(4) @table, i64 0, i64 %i16
  %tv = load i32, ptr addrspace(4) %pt, align 4
  %i4 = and i64 %i64, 3
  %po = getelementptr inbounds [4 x i32], ptr addrspace(1) @offsets, i64 0, i64 %i4
  %ov = load volatile i32, ptr addrspace(1) %po, align 4
  %sv = load volatile i32, ptr addrspace(1) %ps, align 4
  %sum0 = add i32 %tv, %ov
  %sum = add i32 %sum0, %sv
  store volatile i32 %sum, ptr addrspace(1) %ps, align 4
  %back = load volatile i32, ptr addrspace(1) %ps, align 4
  %pout = getelementptr inbounds i32, ptr addrspace(1) %out, i64 %i64
  store i32 %back, ptr addrspace(1) %pout, align 4
  %next = add i32 %i, 1
  %more = icmp ult i32 %next, %count
  br i1 %more, label %loop, label %done
done:
  ret void
}

attributes #0 = { nounwind "amdgpu-flat-work-group-size"="1,1" "amdgpu-no-dispatch-ptr" "amdgpu-no-implicitarg-ptr"
                  "amdgpu-no-dispatch-id" "amdgpu-no-queue-ptr" "amdgpu-no-hostcall-ptr" "amdgpu-no-heap-ptr"
                  "amdgpu-no-multigrid-sync-arg" "amdgpu-no-default-queue" "amdgpu-no-completion-action"
                  "amdgpu-no-lds-kernel-id" "amdgpu-no-workgroup-id-y" "amdgpu-no-workgroup-id-z"
                  "amdgpu-no-workitem-id-y" "amdgpu-no-workitem-id-z" }
