(* SPDX-License-Identifier: MIT *)
(* examples/ocaml/vector_add.ml: c = a + b, the way a Sarek program drives
   its backend: the kernel is an IR value (what Sarek's PPX makes of
     let%kernel vec_add (a : float32 vector) (b : float32 vector)
         (c : float32 vector) (n : int32) =
       let i = global_thread_id in if i < n then c.(i) <- a.(i) +. b.(i)),
   the backend generates and compiles it, the vectors go to the device, the
   kernel runs, the result comes back and is checked against OCaml.
   The inputs live in host arrays the daemon maps (Memory.host_array), so
   their transfers copy nothing through the socket. *)

open Bigarray
open Kit
module B = Hipd_backend
module F = Hipd_framework

let vec_add =
  let i = var "i" 4 I.TInt32 and n = var "n" 3 I.TInt32 in
  I.kernel "vec_add"
    [ global_vec "a" 0; global_vec "b" 1; global_vec "c" 2; scalar "n" 3 ]
    (I.SLet (i, intr "global_thread_id",
       I.SIf (E.(v i < v n), set "c" (v i) E.(get "a" (v i) + get "b" (v i)), None)))

let () =
  B.Device.init ();
  let dev = B.Device.get 0 in
  Printf.printf "vector_add on device 0: %s\n" (B.Device.name dev);
  let n = 1_000_003 in
  let a = B.Memory.host_array dev float32 n and b = B.Memory.host_array dev float32 n in
  for i = 0 to n - 1 do
    a.{i} <- float_of_int (i mod 1000) *. 0.25;
    b.{i} <- float_of_int (i mod 77) -. 3.5
  done;
  let da = B.Memory.alloc dev n float32 and db = B.Memory.alloc dev n float32 in
  let dc = B.Memory.alloc dev n float32 in
  B.Memory.host_to_device ~src:a ~dst:da;
  B.Memory.host_to_device ~src:b ~dst:db;
  let block = F.dims_1d 256 in
  let k = B.Kernel.compile_ir dev ~block vec_add in
  (* The generated signature: a, its length, b, its length, c, its length, n. *)
  let args = B.Kernel.create_args () in
  List.iteri
    (fun pos (buf, len) ->
      B.Kernel.set_arg_buffer args (2 * pos) buf;
      B.Kernel.set_arg_int32 args ((2 * pos) + 1) (Int32.of_int len))
    [ (da, n); (db, n); (dc, n) ];
  B.Kernel.set_arg_int32 args 6 (Int32.of_int n);
  let grid = F.dims_1d ((n + 255) / 256) in
  B.Kernel.launch k ~args ~grid ~block ~shared_mem:0 ~stream:None;
  let c = Array1.create float32 c_layout n in
  B.Memory.device_to_host ~src:dc ~dst:c;
  let bad = ref 0 in
  for i = 0 to n - 1 do
    if c.{i} <> round32 (a.{i} +. b.{i}) then incr bad
  done;
  finish "vector_add" ~bad:!bad ~total:n
