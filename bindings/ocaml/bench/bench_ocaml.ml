(* SPDX-License-Identifier: MIT *)
(* bindings/ocaml/bench/bench_ocaml.ml: host-device bandwidth through the
   OCaml binding, measured as bench/hipd_bench measures the C client's
   (hb_bw.c: one untimed transfer, then synchronous transfers repeated for
   at least the budget and 3 times; GB/s = 10^9 bytes/s):
   - shm: a Bigarray made by Hipd.Shm.create, moved by mem.write_shm /
     mem.read_shm with no copy in this process;
   - inline: an ordinary Bigarray, its bytes through the socket
     (mem.write / mem.read), from and into the Bigarray's own memory.
   Prints one line per figure, named as hipd_bench's JSON names them
   (h2d_shm_1MiB...), for bench/run.sh to set beside the C client's.

     bench_ocaml [--device N] [--sizes 1M,256M] [--seconds S]          *)

open Bigarray

let parse_size s =
  let n = String.length s in
  let num, mul =
    match s.[n - 1] with
    | 'K' | 'k' -> (String.sub s 0 (n - 1), 1024)
    | 'M' | 'm' -> (String.sub s 0 (n - 1), 1024 * 1024)
    | 'G' | 'g' -> (String.sub s 0 (n - 1), 1024 * 1024 * 1024)
    | _ -> (s, 1)
  in
  int_of_string num * mul

let size_label b =
  if b mod (1024 * 1024 * 1024) = 0 then Printf.sprintf "%dGiB" (b / (1024 * 1024 * 1024))
  else if b mod (1024 * 1024) = 0 then Printf.sprintf "%dMiB" (b / (1024 * 1024))
  else if b mod 1024 = 0 then Printf.sprintf "%dKiB" (b / 1024)
  else Printf.sprintf "%dB" b

(* GB/s of [f] moving [bytes] each time. *)
let rate budget bytes f =
  f ();
  let t0 = Unix.gettimeofday () in
  let rec go n =
    f ();
    let t = Unix.gettimeofday () -. t0 in
    if t < budget || n + 1 < 3 then go (n + 1) else (n + 1, t)
  in
  let n, t = go 0 in
  float_of_int n *. float_of_int bytes /. t /. 1e9

let () =
  let device = ref 0 and sizes = ref "1M,256M" and seconds = ref 0.3 in
  Arg.parse
    [ ("--device", Arg.Set_int device, "N the hipd device (default 0)");
      ("--sizes", Arg.Set_string sizes, "LIST transfer sizes (default 1M,256M)");
      ("--seconds", Arg.Set_float seconds, "S least time per figure (default 0.3)") ]
    (fun a -> raise (Arg.Bad a))
    "bench_ocaml: host-device bandwidth through the OCaml binding ($HIPD_SOCKET)";
  let c = Hipd.connect ~client_name:"bench_ocaml" () in
  let dev = Hipd.device_get c ~device:!device () in
  Printf.printf "# OCaml binding, device %d: %s (%s), libhipd %s\n%!" !device
    (Hipd.Info.string dev "name") (Hipd.Info.string dev "arch") (Hipd.version ());
  List.iter
    (fun s ->
      let bytes = parse_size s in
      let n = bytes / 4 in
      let buf = Hipd.mem_alloc c ~device:!device ~kind:"float32" n in
      let shm = Hipd.Shm.create c float32 n in
      let plain = Array1.create float32 c_layout n in
      Array1.fill shm 1.5;
      Array1.fill plain 2.5;
      let label = size_label bytes in
      let fig name f = Printf.printf "%-24s %8.3f GB/s\n%!" (name ^ "_" ^ label) (rate !seconds bytes f) in
      fig "h2d_shm" (fun () -> Hipd.mem_write c buf shm);
      fig "h2d_inline" (fun () -> Hipd.mem_write c buf plain);
      fig "d2h_shm" (fun () -> Hipd.mem_read c buf shm);
      fig "d2h_inline" (fun () -> Hipd.mem_read c buf plain);
      (* The data went through: what was written last is read back. *)
      Hipd.mem_write c buf plain;
      Hipd.mem_read c buf shm;
      if shm.{n - 1} <> 2.5 then (prerr_endline "bench_ocaml: wrong data read back"; exit 1);
      Hipd.mem_free c buf)
    (String.split_on_char ',' !sizes);
  Hipd.close c
