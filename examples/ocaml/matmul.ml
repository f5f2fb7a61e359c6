(* SPDX-License-Identifier: MIT *)
(* examples/ocaml/matmul.ml: C = A B with 16x16 tiles in shared memory, as
   Sarek's tiled matrix multiply: each block loads a tile of A and one of
   B, waits at a barrier, accumulates their product, waits again, and
   moves to the next tile. The kernel is an IR value; the backend compiles
   it (without contraction, as Sarek does) and launches it over a 2-D grid
   of 16x16 blocks on a stream of its own; events time it. The result is
   checked element for element against the same sums computed in OCaml in
   float32, in the same order. *)

open Bigarray
open Kit
module B = Hipd_backend
module F = Hipd_framework

let tile = 16

let matmul_tiled =
  let m = var "m" 3 I.TInt32 and n = var "n" 4 I.TInt32 and k = var "k" 5 I.TInt32 in
  let tx = var "tx" 6 I.TInt32 and ty = var "ty" 7 I.TInt32 in
  let row = var "row" 8 I.TInt32 and col = var "col" 9 I.TInt32 in
  let tiles = var "num_tiles" 10 I.TInt32 in
  let sum = var ~mutable_:true "sum" 11 I.TFloat32 in
  let t = var "t" 12 I.TInt32 and i = var "i" 13 I.TInt32 in
  let a_col = var "a_col" 14 I.TInt32 and b_row = var "b_row" 15 I.TInt32 in
  let ts = i32 tile in
  let slot = E.((v ty * ts) + v tx) in
  let load dst cond src =
    I.SIf (cond, set dst slot src, Some (set dst slot (f32 0.)))
  in
  I.kernel "matmul_tiled"
    [ global_vec "a" 0; global_vec "b" 1; global_vec "c" 2; scalar "m" 3; scalar "n" 4; scalar "k" 5 ]
    ~locals:
      [ I.DShared ("tile_a", I.TFloat32, Some (i32 (tile * tile)));
        I.DShared ("tile_b", I.TFloat32, Some (i32 (tile * tile))) ]
    (I.SLet (tx, intr "thread_idx_x",
     I.SLet (ty, intr "thread_idx_y",
     I.SLet (row, E.(v ty + (intr "block_dim_y" * intr "block_idx_y")),
     I.SLet (col, E.(v tx + (intr "block_dim_x" * intr "block_idx_x")),
     I.SLet (tiles, E.((v k + ts - i32 1) / ts),
     I.SLetMut (sum, f32 0.,
       I.SSeq
         [ I.SFor (t, i32 0, E.(v tiles - i32 1), I.Upto,
             I.SSeq
               [ I.SBlock
                   (I.SLet (a_col, E.((v t * ts) + v tx),
                      load "tile_a" E.(v row < v m && v a_col < v k)
                        (get "a" E.((v row * v k) + v a_col))));
                 I.SBlock
                   (I.SLet (b_row, E.((v t * ts) + v ty),
                      load "tile_b" E.(v b_row < v k && v col < v n)
                        (get "b" E.((v b_row * v n) + v col))));
                 I.SBarrier;
                 I.SFor (i, i32 0, E.(ts - i32 1), I.Upto,
                   I.SAssign (I.LVar sum,
                     E.(v sum + (get "tile_a" ((v ty * ts) + v i) * get "tile_b" ((v i * ts) + v tx)))));
                 I.SBarrier ]);
           I.SIf (E.(v row < v m && v col < v n), set "c" E.((v row * v n) + v col) (v sum), None) ])))))))

let () =
  B.Device.init ();
  let dev = B.Device.get 0 in
  let m = 100 and n = 72 and k = 131 in
  Printf.printf "matmul (%dx%d times %dx%d) on device 0: %s\n" m k k n (B.Device.name dev);
  let a = Array1.init float32 c_layout (m * k) (fun x -> float_of_int ((x * 7) mod 11) *. 0.5) in
  let b = Array1.init float32 c_layout (k * n) (fun x -> float_of_int ((x * 5) mod 13) -. 6.) in
  let da = B.Memory.alloc dev (m * k) float32 and db = B.Memory.alloc dev (k * n) float32 in
  let dc = B.Memory.alloc dev (m * n) float32 in
  B.Memory.host_to_device ~src:a ~dst:da;
  B.Memory.host_to_device ~src:b ~dst:db;
  let block = F.dims_2d tile tile in
  let kern = B.Kernel.compile_ir dev ~block matmul_tiled in
  let args = B.Kernel.create_args () in
  List.iteri
    (fun p (buf, len) ->
      B.Kernel.set_arg_buffer args (2 * p) buf;
      B.Kernel.set_arg_int32 args ((2 * p) + 1) (Int32.of_int len))
    [ (da, m * k); (db, k * n); (dc, m * n) ];
  List.iteri (fun p x -> B.Kernel.set_arg_int32 args (6 + p) (Int32.of_int x)) [ m; n; k ];
  let stream = B.Stream.create dev in
  let start = B.Event.create () and stop = B.Event.create () in
  B.Event.record start stream;
  B.Kernel.launch kern ~args ~grid:(F.dims_2d ((n + tile - 1) / tile) ((m + tile - 1) / tile)) ~block
    ~shared_mem:0 ~stream:(Some stream);
  B.Event.record stop stream;
  B.Event.synchronize stop;
  Printf.printf "matmul: kernel %.3f ms\n" (B.Event.elapsed ~start ~stop);
  let c = Array1.create float32 c_layout (m * n) in
  B.Memory.device_to_host ~src:dc ~dst:c;
  let bad = ref 0 in
  for r = 0 to m - 1 do
    for q = 0 to n - 1 do
      let s = ref 0. in
      for x = 0 to k - 1 do
        s := round32 (!s +. round32 (a.{(r * k) + x} *. b.{(x * n) + q}))
      done;
      if c.{(r * n) + q} <> !s then incr bad
    done
  done;
  B.Stream.destroy stream;
  finish "matmul" ~bad:!bad ~total:(m * n)
