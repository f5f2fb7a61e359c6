(* SPDX-License-Identifier: MIT *)
(* examples/ocaml/reduction.ml: the sum of a vector in two launches of one
   kernel, as Sarek's reduction: each block of 256 threads loads its part
   (one element per thread, 0 past the end) into shared memory, halves it
   with a barrier between steps, and thread 0 writes the block's sum; the
   partial sums are reduced by a second launch of the same kernel. The
   kernel is an IR value; its launches are checked by the daemon against
   the generated signature. The values are integers in float32, so the
   sum is exact and checked exactly against OCaml's. *)

open Bigarray
open Kit
module B = Hipd_backend
module F = Hipd_framework

let threads = 256

let reduce =
  let n = var "n" 2 I.TInt32 and tid = var "tid" 3 I.TInt32 and gid = var "gid" 4 I.TInt32 in
  let s = var ~mutable_:true "s" 5 I.TInt32 in
  I.kernel "block_sum"
    [ global_vec "input" 0; global_vec "output" 1; scalar "n" 2 ]
    ~locals:[ I.DShared ("cache", I.TFloat32, Some (i32 threads)) ]
    (I.SLet (tid, intr "thread_idx_x",
     I.SLet (gid, intr "global_thread_id",
       I.SSeq
         [ I.SIf (E.(v gid < v n), set "cache" (v tid) (get "input" (v gid)),
             Some (set "cache" (v tid) (f32 0.)));
           I.SBarrier;
           I.SLetMut (s, i32 (threads / 2),
             I.SWhile (E.(i32 0 < v s),
               I.SSeq
                 [ I.SIf (E.(v tid < v s),
                     set "cache" (v tid) E.(get "cache" (v tid) + get "cache" (v tid + v s)), None);
                   I.SBarrier;
                   I.SAssign (I.LVar s, E.(v s / i32 2)) ]));
           I.SIf (I.EBinop (I.Eq, v tid, i32 0),
             set "output" (intr "block_idx_x") (get "cache" (i32 0)), None) ])))

let () =
  B.Device.init ();
  let dev = B.Device.get 0 in
  let n = 200_000 in
  Printf.printf "reduction of %d floats on device 0: %s\n" n (B.Device.name dev);
  let x = Array1.init float32 c_layout n (fun i -> float_of_int ((i * 31) mod 97)) in
  let blocks = (n + threads - 1) / threads in
  let din = B.Memory.alloc dev n float32 and dpart = B.Memory.alloc dev blocks float32 in
  let dsum = B.Memory.alloc dev 1 float32 in
  B.Memory.host_to_device ~src:x ~dst:din;
  let block = F.dims_1d threads in
  let k = B.Kernel.compile_ir dev ~block reduce in
  let launch src src_len dst dst_len count grid =
    let a = B.Kernel.create_args () in
    B.Kernel.set_arg_buffer a 0 src;
    B.Kernel.set_arg_int32 a 1 (Int32.of_int src_len);
    B.Kernel.set_arg_buffer a 2 dst;
    B.Kernel.set_arg_int32 a 3 (Int32.of_int dst_len);
    B.Kernel.set_arg_int32 a 4 (Int32.of_int count);
    B.Kernel.launch k ~args:a ~grid:(F.dims_1d grid) ~block ~shared_mem:0 ~stream:None
  in
  (* 782 partial sums fit in 4 blocks of a second pass, then one more. *)
  let rec passes src len =
    let g = (len + threads - 1) / threads in
    if g = 1 then launch src len dsum 1 len 1
    else begin
      let dst = if src == din then dpart else B.Memory.alloc dev g float32 in
      launch src len dst g len g;
      passes dst g
    end
  in
  passes din n;
  let r = Array1.create float32 c_layout 1 in
  B.Memory.device_to_host ~src:dsum ~dst:r;
  let expect = ref 0. in
  for i = 0 to n - 1 do expect := !expect +. x.{i} done;
  Printf.printf "reduction: %.1f (OCaml: %.1f)\n" r.{0} !expect;
  finish "reduction" ~bad:(if r.{0} = !expect then 0 else 1) ~total:1
