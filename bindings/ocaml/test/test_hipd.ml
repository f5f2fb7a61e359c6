(* SPDX-License-Identifier: MIT *)
(* bindings/ocaml/test/test_hipd.ml: the OCaml binding against a real hipd
   ($HIPD_SOCKET, started by tests/check_ocaml.sh), on whatever device 0
   is: the CPU device in make check, the GPU under scripts/gpu-check.sh.
   Every function of Hipd_backend, the Bigarray kinds, the IR, the errors
   (their hipd codes and messages), events, two connections at once. *)

open Bigarray
module B = Hipd_backend
module F = Hipd_framework
module I = Hipd_ir

let dims = F.dims_1d

let amake kind n x =
  let a = Array1.create kind c_layout n in
  Array1.fill a x;
  a

(* An exception with hipd's code, whose message contains [part]. *)
let check_error ?(part = "") code f =
  match f () with
  | _ -> Alcotest.failf "expected Hipd.Error (%s, _), got a result" (Hipd.code_name code)
  | exception Hipd.Error (c, msg) ->
      if c <> code then
        Alcotest.failf "expected %s, got Hipd.Error (%s, %S)" (Hipd.code_name code)
          (Hipd.code_name c) msg;
      if msg = "" then Alcotest.fail "the error has no message";
      let contains s sub =
        let n = String.length sub and m = String.length s in
        let rec go i = i + n <= m && (String.sub s i n = sub || go (i + 1)) in
        n = 0 || go 0
      in
      if not (contains msg part) then
        Alcotest.failf "the message of %s does not say %S: %S" (Hipd.code_name c) part msg

let contains s sub =
  let n = String.length sub and m = String.length s in
  let rec go i = i + n <= m && (String.sub s i n = sub || go (i + 1)) in
  go 0

let dev () = B.Device.get 0

(* A second backend, on a connection of its own. *)
module B2 = Hipd_backend.Make (struct
  let c = lazy (Hipd.connect ~client_name:"second" ())
  let connection () = Lazy.force c
end)

(* ------------------------------------------------------------ errors *)

let test_codes () =
  for n = -40 to -1 do
    let c = Hipd.code_of_int n in
    Alcotest.(check string) "name as libhipd's" (Hipd.c_err_name n) (Hipd.code_name c);
    Alcotest.(check int) "number" n (Hipd.code_to_int c);
    Alcotest.(check bool) "by name" true (Hipd.code_of_name (Hipd.code_name c) = Some c)
  done;
  Alcotest.(check bool) "unknown" true (Hipd.code_of_int (-99) = Hipd.Unknown_code (-99));
  Alcotest.(check string) "EFOREIGN" "EFOREIGN" (Hipd.code_name Hipd.EFOREIGN);
  Alcotest.(check bool) "strerror" true (Hipd.strerror Hipd.ESTALE <> "")

(* ---------------------------------------------------------- identity *)

let test_identity () =
  Alcotest.(check string) "name" "hip" B.name;
  let a, b, c = B.version in
  Alcotest.(check string) "version" (Hipd.version ()) (Printf.sprintf "%d.%d.%d" a b c);
  Alcotest.(check bool) "available" true (B.is_available ());
  Alcotest.(check bool) "jit" true (B.execution_model = F.JIT);
  let i = Hipd.backend_info (B.connection ()) in
  Alcotest.(check string) "backend.info name" "hip" (Hipd.Info.string i "name");
  Alcotest.(check bool) "ir versions" true (Hipd.Info.length i "ir_versions" >= 2)

(* ----------------------------------------------------------- devices *)

let test_devices () =
  B.Device.init ();
  let n = B.Device.count () in
  Alcotest.(check bool) "count >= 1" true (n >= 1);
  let d = dev () in
  Alcotest.(check int) "id" 0 (B.Device.id d);
  Alcotest.(check bool) "name" true (B.Device.name d <> "");
  let c = B.Device.capabilities d in
  let r = Hipd.device_get (B.connection ()) ~device:0 () in
  let ci p = Hipd.Info.int r ("capabilities." ^ p) in
  (* Every field of the record against the daemon's own record. *)
  Alcotest.(check int) "max_threads_per_block" (ci "max_threads_per_block") c.max_threads_per_block;
  let bx, by, bz = c.max_block_dims and gx, gy, gz = c.max_grid_dims in
  Alcotest.(check (list int)) "max_block_dims"
    [ ci "max_block_dims.0"; ci "max_block_dims.1"; ci "max_block_dims.2" ] [ bx; by; bz ];
  Alcotest.(check (list int)) "max_grid_dims"
    [ ci "max_grid_dims.0"; ci "max_grid_dims.1"; ci "max_grid_dims.2" ] [ gx; gy; gz ];
  Alcotest.(check int) "shared_mem_per_block" (ci "shared_mem_per_block") c.shared_mem_per_block;
  Alcotest.(check int64) "total_global_mem"
    (Hipd.Info.int64 r "capabilities.total_global_mem") c.total_global_mem;
  Alcotest.(check bool) "total_global_mem > 0" true (c.total_global_mem > 0L);
  let ma, mi = c.compute_capability in
  Alcotest.(check (list int)) "compute_capability"
    [ ci "compute_capability.0"; ci "compute_capability.1" ] [ ma; mi ];
  Alcotest.(check bool) "fp64" true c.supports_fp64;
  Alcotest.(check bool) "atomics" true c.supports_atomics;
  Alcotest.(check int) "warp_size" (ci "warp_size") c.warp_size;
  Alcotest.(check int) "max_registers_per_block" (ci "max_registers_per_block") c.max_registers_per_block;
  Alcotest.(check int) "clock_rate_khz" (ci "clock_rate_khz") c.clock_rate_khz;
  Alcotest.(check int) "multiprocessor_count" (ci "multiprocessor_count") c.multiprocessor_count;
  Alcotest.(check bool) "multiprocessors" true (c.multiprocessor_count >= 1);
  Alcotest.(check bool) "is_cpu" (Hipd.Info.bool r "is_cpu") c.is_cpu;
  if c.is_cpu then begin
    Alcotest.(check int) "CPU warp" 1 c.warp_size;
    Alcotest.(check (pair int int)) "CPU cc" (0, 0) c.compute_capability;
    Alcotest.(check int) "CPU block" 1024 c.max_threads_per_block;
    Alcotest.(check bool) "CPU arch" true (String.length (B.Device.arch d) >= 4 && String.sub (B.Device.arch d) 0 4 = "host")
  end;
  B.Device.set_current d;
  Alcotest.(check int) "current" 0 (Hipd.device_current (B.connection ()));
  B.Device.synchronize d;
  check_error ~part:"no device" Hipd.ENODEV (fun () -> B.Device.get 4096)

(* ----------------------------------------------------------- streams *)

let test_streams () =
  let d = dev () in
  let s = B.Stream.create d in
  B.Stream.synchronize s;
  let s0 = B.Stream.default d in
  B.Stream.synchronize s0;
  B.Stream.destroy s;
  check_error Hipd.ESTALE (fun () -> B.Stream.synchronize s);
  check_error Hipd.EPERM (fun () -> B.Stream.destroy s0);
  Alcotest.(check bool) "query" true (Hipd.stream_query (B.connection ()) s0)

(* ------------------------------------------------------------ memory *)

(* One Bigarray kind: fill, host to device, back into a zeroed array, the
   same bytes; the device size in elements. *)
let roundtrip : type a b. string -> (a, b) kind -> (int -> a) -> unit =
 fun what kind gen ->
  let n = 1000 in
  let d = dev () in
  let src = Array1.init kind c_layout n gen in
  let dst = Array1.create kind c_layout n in
  Array1.fill dst (gen (-1));
  let b = B.Memory.alloc d n kind in
  Alcotest.(check int) (what ^ " size") n (B.Memory.size b);
  Alcotest.(check int) (what ^ " bytes") (n * kind_size_in_bytes kind)
    (Hipd.mem_size (B.connection ()) (B.Memory.handle b));
  Alcotest.(check int) (what ^ " elem_size") (kind_size_in_bytes kind)
    (Hipd.Info.int (Hipd.mem_info (B.connection ()) (B.Memory.handle b)) "elem_size");
  B.Memory.host_to_device ~src ~dst:b;
  B.Memory.device_to_host ~src:b ~dst;
  for i = 0 to n - 1 do
    if Array1.get src i <> Array1.get dst i then Alcotest.failf "%s: element %d differs" what i
  done;
  B.Memory.free b

let test_kinds () =
  roundtrip "float32" float32 (fun i -> float_of_int i *. 0.5);
  roundtrip "float64" float64 (fun i -> float_of_int i /. 3.);
  roundtrip "int8_signed" int8_signed (fun i -> (i mod 256) - 128);
  roundtrip "int8_unsigned" int8_unsigned (fun i -> (i * 7) land 255);
  roundtrip "int16_signed" int16_signed (fun i -> (i * 37) - 16000);
  roundtrip "int16_unsigned" int16_unsigned (fun i -> (i * 61) land 0xffff);
  roundtrip "int32" int32 (fun i -> Int32.of_int ((i * 100003) - 7));
  roundtrip "int64" int64 (fun i -> Int64.(add (shift_left (of_int i) 40) 12345L));
  roundtrip "int" int (fun i -> (i lsl 33) + 1);
  roundtrip "nativeint" nativeint (fun i -> Nativeint.of_int (i * 3));
  roundtrip "char" char (fun i -> Char.chr (i land 255));
  roundtrip "complex32" complex32 (fun i -> { Complex.re = float_of_int i; im = -.float_of_int i });
  roundtrip "complex64" complex64 (fun i -> { Complex.re = float_of_int i /. 7.; im = 1. /. float_of_int (i + 2) })

let kind_of_mem b = Hipd.Info.int (Hipd.mem_info (B.connection ()) (B.Memory.handle b)) "elem_size"

let test_memory () =
  let d = dev () in
  (* custom elements: 3 records of 12 bytes *)
  let b : unit B.Memory.buffer = B.Memory.alloc_custom d ~size:3 ~elem_size:12 in
  Alcotest.(check int) "custom size" 3 (B.Memory.size b);
  Alcotest.(check int) "custom elem_size" 12 (kind_of_mem b);
  Alcotest.(check bool) "device_ptr" true (B.Memory.device_ptr b <> 0n);
  Alcotest.(check bool) "not zero-copy" false (B.Memory.is_zero_copy b);
  (* raw pointers *)
  let src = Array1.init char c_layout 36 (fun i -> Char.chr (65 + (i mod 26))) in
  let dst = Array1.create char c_layout 36 in
  Array1.fill dst '.';
  B.Memory.host_ptr_to_device ~src_ptr:(Hipd.bigarray_address src) ~byte_size:36 ~dst:b;
  B.Memory.device_to_host_ptr ~src:b ~dst_ptr:(Hipd.bigarray_address dst) ~byte_size:36;
  Alcotest.(check bool) "raw round trip" true (src = dst);
  check_error Hipd.EINVAL (fun () -> B.Memory.host_ptr_to_device ~src_ptr:0n ~byte_size:4 ~dst:b);
  (* device to device *)
  let a = B.Memory.alloc d 64 float64 and c = B.Memory.alloc d 64 float64 in
  let x = Array1.init float64 c_layout 64 (fun i -> float_of_int (i * i)) in
  let y = Array1.create float64 c_layout 64 in
  B.Memory.host_to_device ~src:x ~dst:a;
  B.Memory.device_to_device ~src:a ~dst:c;
  B.Memory.device_to_host ~src:c ~dst:y;
  Alcotest.(check bool) "device to device" true (x = y);
  (* a range past the buffer: hipd's ERANGE and its message *)
  let big = Array1.create float64 c_layout 65 in
  check_error ~part:"exceeds buffer" Hipd.ERANGE (fun () -> B.Memory.host_to_device ~src:big ~dst:a);
  (* parts of a Bigarray at offsets *)
  let conn = B.connection () in
  Hipd.mem_write conn (B.Memory.handle a) ~offset:8 ~pos:10 ~len:2 x;
  let z = Array1.create float64 c_layout 3 in
  Hipd.mem_read conn (B.Memory.handle a) ~offset:0 z;
  Alcotest.(check (list (float 0.))) "partial" [ 0.; 100.; 121. ] [ z.{0}; z.{1}; z.{2} ];
  check_error Hipd.ERANGE (fun () -> Hipd.mem_write conn (B.Memory.handle a) ~pos:60 ~len:10 x);
  check_error ~part:"negative" Hipd.EINVAL (fun () -> Hipd.mem_write conn (B.Memory.handle a) ~len:(-3) x);
  check_error ~part:"negative" Hipd.EINVAL (fun () -> Hipd.mem_read conn (B.Memory.handle a) ~offset:(-8) x);
  (* alloc errors *)
  check_error Hipd.EINVAL (fun () -> B.Memory.alloc d 0 float32);
  check_error Hipd.EINVAL (fun () -> B.Memory.alloc d (-5) float32);
  List.iter B.Memory.free [ a; c ]

(* Shared memory: a Bigarray the daemon maps. *)
let test_shm () =
  let d = dev () in
  let conn = B.connection () in
  let h = B.Memory.host_array d float32 4096 in
  Alcotest.(check bool) "shared" true (Hipd.Shm.is_shared conn h);
  Alcotest.(check bool) "zeroed" true (h.{0} = 0. && h.{4095} = 0.);
  for i = 0 to 4095 do h.{i} <- float_of_int i done;
  let b = B.Memory.alloc d 4096 float32 in
  B.Memory.host_to_device ~src:h ~dst:b;
  let back = B.Memory.host_array d float32 4096 in
  B.Memory.device_to_host ~src:b ~dst:back;
  Alcotest.(check bool) "through shm" true (h = back);
  (* a view (Array1.sub) of a shared array, on both sides *)
  let view = Array1.sub back 100 10 in
  Alcotest.(check bool) "view is shared" true (Hipd.Shm.is_shared conn view);
  Array1.fill view 0.;
  Hipd.mem_read conn (B.Memory.handle b) ~offset:(4 * 100) view;
  Alcotest.(check (float 0.)) "view read" 100. back.{100};
  Alcotest.(check (float 0.)) "view read end" 109. back.{109};
  (* zero copy: the buffer is the host array *)
  (match B.Memory.alloc_zero_copy d h float32 with
  | None -> Alcotest.fail "alloc_zero_copy of a host_array: None"
  | Some z ->
      Alcotest.(check bool) "is_zero_copy" true (B.Memory.is_zero_copy z);
      Alcotest.(check int) "zero-copy size" 4096 (B.Memory.size z);
      (* a kernel writes the buffer; the host array sees it with no transfer *)
      let k =
        B.Kernel.compile d ~name:"twice"
          ~source:
            "extern \"C\" __global__ void twice(float *a, int n) {\n\
            \  int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
            \  if (i < n) a[i] = 2.0f * a[i];\n}\n"
      in
      let args = B.Kernel.create_args () in
      B.Kernel.set_arg_buffer args 0 z;
      B.Kernel.set_arg_int32 args 1 4096l;
      B.Kernel.launch k ~args ~grid:(dims 16) ~block:(dims 256) ~shared_mem:0 ~stream:None;
      B.Device.synchronize d;
      Alcotest.(check (float 0.)) "zero copy seen" 8190. h.{4095};
      B.Memory.free z);
  let plain = Array1.create float32 c_layout 16 in
  Alcotest.(check bool) "plain: no zero copy" true (B.Memory.alloc_zero_copy d plain float32 = None);
  Alcotest.(check bool) "plain not shared" false (Hipd.Shm.is_shared conn plain);
  check_error Hipd.ENOTSUP (fun () -> Hipd.mem_alloc_zero_copy conn plain);
  check_error Hipd.EINVAL (fun () -> Hipd.Shm.create conn float32 0);
  B.Memory.free b

(* Collected handles and shared arrays are released by the next call. *)
let test_gc () =
  let conn = Hipd.connect () in
  let res k = Hipd.Info.int (Hipd.session_info conn) ("resources." ^ k) in
  let before = res "buffers" and shm_before = res "shared_buffers" in
  for _ = 1 to 50 do
    ignore (Sys.opaque_identity (Hipd.mem_alloc conn ~kind:"float32" 16))
  done;
  let keep = Hipd.mem_alloc conn ~kind:"int32" 4 in
  for _ = 1 to 5 do
    ignore (Sys.opaque_identity (Hipd.Shm.create conn int32 1024))
  done;
  Alcotest.(check int) "allocated" (before + 51) (res "buffers");
  Alcotest.(check int) "shared" (shm_before + 5) (res "shared_buffers");
  Gc.full_major ();
  ignore (res "buffers");
  Alcotest.(check int) "released" (before + 1) (res "buffers");
  Alcotest.(check int) "shared released" shm_before (res "shared_buffers");
  Hipd.mem_free conn keep;
  Alcotest.(check int) "freed" before (res "buffers");
  Hipd.close conn

(* ------------------------------------------------------------ events *)

let busy_source =
  "extern \"C\" __global__ void busy(float *a, int n, int iters) {\n\
  \  int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
  \  if (i >= n) return;\n\
  \  float x = a[i];\n\
  \  for (int k = 0; k < iters; k++) x = x * 0.999f + 0.001f;\n\
  \  a[i] = x;\n}\n"

let test_events () =
  let d = dev () in
  let s = B.Stream.create d in
  let k = B.Kernel.compile_cached d ~name:"busy" ~source:busy_source in
  let buf = B.Memory.alloc d 256 float32 in
  let args = B.Kernel.create_args () in
  B.Kernel.set_arg_buffer args 0 buf;
  B.Kernel.set_arg_int32 args 1 256l;
  let time iters =
    B.Kernel.set_arg_int32 args 2 (Int32.of_int iters);
    let e0 = B.Event.create () and e1 = B.Event.create () in
    B.Event.record e0 s;
    B.Kernel.launch k ~args ~grid:(dims 1) ~block:(dims 256) ~shared_mem:0 ~stream:(Some s);
    B.Event.record e1 s;
    B.Event.synchronize e1;
    let ms = B.Event.elapsed ~start:e0 ~stop:e1 in
    B.Event.destroy e0;
    B.Event.destroy e1;
    ms
  in
  (* Untimed first: a kernel's first launch may load its code on the
     device (CUDA's lazy loading), between the events of whatever it
     times; then a kernel some 10^4 times longer than the other. *)
  ignore (time 10);
  let short = time 10 and long = time 2_000_000 in
  Alcotest.(check bool) (Printf.sprintf "elapsed >= 0 (%g ms)" short) true (short >= 0.);
  Alcotest.(check bool) (Printf.sprintf "a longer kernel takes longer (%g ms > %g ms)" long short) true (long > short);
  let e = B.Event.create () in
  check_error Hipd.ENOTRECORDED (fun () -> B.Event.elapsed ~start:e ~stop:e);
  B.Event.destroy e;
  check_error Hipd.ESTALE (fun () -> B.Event.synchronize e);
  B.Stream.destroy s

(* ----------------------------------------------------------- kernels *)

let axpy_source =
  "extern \"C\" __global__ void axpy3(double *y, const double *x, double a, long long n,\n\
  \                                  int nx, int ny) {\n\
  \  long long i = (long long)blockIdx.z * blockDim.z + threadIdx.z;\n\
  \  long long j = (long long)blockIdx.y * blockDim.y + threadIdx.y;\n\
  \  long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n\
  \  long long idx = (i * ny + j) * nx + k;\n\
  \  if (k < nx && j < ny && idx < n) y[idx] = a * x[idx] + y[idx];\n}\n"

let test_kernels () =
  let d = dev () in
  let k = B.Kernel.compile d ~name:"axpy3" ~source:axpy_source in
  let k2 = B.Kernel.compile_cached d ~name:"axpy3" ~source:axpy_source in
  let k3 = B.Kernel.compile_cached d ~name:"axpy3" ~source:axpy_source in
  Alcotest.(check bool) "compile_cached keeps" true (k2 == k3);
  B.Kernel.clear_cache ();
  let k4 = B.Kernel.compile_cached d ~name:"axpy3" ~source:axpy_source in
  Alcotest.(check bool) "clear_cache forgets" false (k4 == k2);
  let nx = 8 and ny = 4 and nz = 2 in
  let n = nx * ny * nz in
  let x = Array1.init float64 c_layout n float_of_int in
  let y = Array1.init float64 c_layout n (fun i -> float_of_int (2 * i)) in
  let bx = B.Memory.alloc d n float64 and by = B.Memory.alloc d n float64 in
  B.Memory.host_to_device ~src:x ~dst:bx;
  B.Memory.host_to_device ~src:y ~dst:by;
  (* arguments set out of order, by position *)
  let args = B.Kernel.create_args () in
  B.Kernel.set_arg_int32 args 5 (Int32.of_int ny);
  B.Kernel.set_arg_buffer args 0 by;
  B.Kernel.set_arg_int64 args 3 (Int64.of_int n);
  B.Kernel.set_arg_float64 args 2 0.5;
  B.Kernel.set_arg_buffer args 1 bx;
  B.Kernel.set_arg_int32 args 4 (Int32.of_int nx);
  let s = B.Stream.create d in
  B.Kernel.launch k ~args ~grid:(F.dims_3d 2 2 1) ~block:(F.dims_3d 4 2 2) ~shared_mem:0 ~stream:(Some s);
  B.Stream.synchronize s;
  let out = Array1.create float64 c_layout n in
  B.Memory.device_to_host ~src:by ~dst:out;
  for i = 0 to n - 1 do
    Alcotest.(check (float 0.)) (Printf.sprintf "y[%d]" i) ((0.5 *. float_of_int i) +. float_of_int (2 * i)) out.{i}
  done;
  (* a gap in the positions *)
  let gap = B.Kernel.create_args () in
  B.Kernel.set_arg_buffer gap 0 by;
  B.Kernel.set_arg_int32 gap 2 1l;
  check_error ~part:"argument 1" Hipd.EINVAL (fun () ->
      B.Kernel.launch k ~args:gap ~grid:(dims 1) ~block:(dims 1) ~shared_mem:0 ~stream:None);
  (* float32 and pointer arguments *)
  let kf =
    B.Kernel.compile d ~name:"fill"
      ~source:"extern \"C\" __global__ void fill(float *p, float v) { p[threadIdx.x] = v; }\n"
  in
  let bf = B.Memory.alloc d 4 float32 in
  let a = B.Kernel.create_args () in
  B.Kernel.set_arg_ptr a 0 (B.Memory.device_ptr bf);
  B.Kernel.set_arg_float32 a 1 2.5;
  B.Kernel.launch kf ~args:a ~grid:(dims 1) ~block:(dims 4) ~shared_mem:0 ~stream:None;
  let r = Array1.create float32 c_layout 4 in
  B.Memory.device_to_host ~src:bf ~dst:r;
  Alcotest.(check (float 0.)) "f32 via ptr" 2.5 r.{3};
  (* unwrap/wrap *)
  Alcotest.(check bool) "unwrap wrap" true
    (match B.unwrap_kargs (B.wrap_kargs a) with Some a' -> a' == a | None -> false);
  Alcotest.(check bool) "another backend's kargs" true (B2.unwrap_kargs (B.wrap_kargs a) = None);
  Alcotest.(check bool) "unwrap other" true (B.unwrap_kargs F.No_kargs = None);
  B.Stream.destroy s

(* Bad dimensions and limits: the daemon's or the binding's EINVAL/ELIMIT. *)
let test_bad_dims () =
  let d = dev () in
  let k = B.Kernel.compile_cached d ~name:"busy" ~source:busy_source in
  let buf = B.Memory.alloc d 16 float32 in
  let args = B.Kernel.create_args () in
  B.Kernel.set_arg_buffer args 0 buf;
  B.Kernel.set_arg_int32 args 1 16l;
  B.Kernel.set_arg_int32 args 2 1l;
  let launch grid block =
    B.Kernel.launch k ~args ~grid ~block ~shared_mem:0 ~stream:None
  in
  check_error ~part:"grid.x" Hipd.EINVAL (fun () -> launch (dims (-1)) (dims 1));
  check_error ~part:"block.y" Hipd.EINVAL (fun () -> launch (dims 1) (F.dims_2d 1 (1 lsl 40)));
  (* zero and too large: the daemon's answer *)
  (match launch (dims 0) (dims 1) with
  | () -> Alcotest.fail "a grid of 0 blocks was accepted"
  | exception Hipd.Error ((Hipd.EINVAL | Hipd.ELIMIT | Hipd.EPARAMS), m) ->
      Alcotest.(check bool) ("message: " ^ m) true (m <> ""));
  let mt = (B.Device.capabilities d).max_threads_per_block in
  check_error Hipd.ELIMIT (fun () -> launch (dims 1) (dims (mt + 1)))

let test_compile_error () =
  let d = dev () in
  check_error ~part:"undeclared_thing" Hipd.ECOMPILE (fun () ->
      B.Kernel.compile d ~name:"bad"
        ~source:"extern \"C\" __global__ void bad(int *p) { p[0] = undeclared_thing; }\n")

(* ------------------------------------------------- the IR and codegen *)

let v = I.var
let evar x = I.EVar x
let i32 n = I.EConst (I.CInt32 (Int32.of_int n))
let gid = I.EIntrinsic ([ "Gpu" ], "global_thread_id", [])

(* The vector add of IR.md, as a Sarek program holds it. *)
let vec_add =
  let a = v "a" 0 (I.TVec I.TFloat32) and b = v "b" 1 (I.TVec I.TFloat32) in
  let c = v "c" 2 (I.TVec I.TFloat32) and n = v "n" 3 I.TInt32 in
  let i = v "i" 4 I.TInt32 in
  let ai = Some { I.arr_elttype = I.TFloat32; arr_memspace = I.Global } in
  I.kernel "vec_add"
    [ I.DParam (a, ai); I.DParam (b, ai); I.DParam (c, ai); I.DParam (n, None) ]
    (I.SLet
       ( i, gid,
         I.SIf
           ( I.EBinop (I.Lt, evar i, evar n),
             I.SAssign
               ( I.LArrayElem ("c", evar i),
                 I.EBinop (I.Add, I.EArrayRead ("a", evar i), I.EArrayRead ("b", evar i)) ),
             None ) ))

(* A record parameter: [type point = {x; y : float32}], each point
   swapped, its norm written to [out]. *)
let point = I.TRecord ("Geo.point", [ ("x", I.TFloat32); ("y", I.TFloat32) ])

let swap_norm =
  let pts = v "pts" 0 (I.TVec point) and out = v "out" 1 (I.TVec I.TFloat32) in
  let i = v "i" 2 I.TInt32 and p = v "p" 3 point in
  let f e name = I.ERecordField (e, name) in
  let sq e = I.EBinop (I.Mul, e, e) in
  I.kernel "swap_norm" ~types:[ ("Geo.point", [ ("x", I.TFloat32); ("y", I.TFloat32) ]) ]
    [ I.DParam (pts, None); I.DParam (out, None) ]
    (I.SLet
       ( i, I.EIntrinsic ([], "global_thread_id", []),
         I.SIf
           ( I.EBinop (I.Lt, evar i, I.EArrayLen "pts"),
             I.SLet
               ( p, I.EArrayRead ("pts", evar i),
                 I.SSeq
                   [ I.SAssign
                       ( I.LArrayElem ("pts", evar i),
                         I.ERecord ("Geo.point", [ ("y", f (evar p) "x"); ("x", f (evar p) "y") ]) );
                     I.SAssign
                       ( I.LArrayElem ("out", evar i),
                         I.EIntrinsic ([ "Float32" ], "sqrt", [ I.EBinop (I.Add, sq (f (evar p) "x"), sq (f (evar p) "y")) ]) ) ] ),
             None ) ))

let test_msgpack () =
  let open Hipd_msgpack in
  let hex s = String.concat "" (List.map (fun c -> Printf.sprintf "%02x" (Char.code c)) (List.of_seq (String.to_seq s))) in
  let chk what exp v = Alcotest.(check string) what exp (hex (to_string v)) in
  chk "fixint" "05" (int 5);
  chk "negative fixint" "ff" (int (-1));
  chk "uint8" "cc80" (int 128);
  chk "int8" "d0df" (int (-33));
  chk "uint16" "cd0100" (int 256);
  chk "int32" "d2ffff7fff" (int (-32769));
  chk "uint64" "cf0000000100000000" (Int 0x1_0000_0000L);
  chk "int64 min" "d38000000000000000" (Int Int64.min_int);
  chk "float" "cb3ff8000000000000" (Float 1.5);
  chk "nil true false" "93c0c3c2" (Array [ Nil; Bool true; Bool false ]);
  chk "map" "81a2697201" (Map [ ("ir", int 1) ]);
  chk "str8" ("d920" ^ String.concat "" (List.init 32 (fun _ -> "61"))) (Str (String.make 32 'a'));
  Alcotest.(check int) "array16" 3 (String.length (to_string (Array (List.init 16 (fun _ -> Nil)))) - 16)

let test_generate () =
  let src = Option.get (B.generate_source vec_add) in
  Alcotest.(check bool) "kernel" true (contains src "vec_add(");
  Alcotest.(check bool) "length params" true (contains src "int sarek_a_length");
  Alcotest.(check bool) "body" true (contains src "c[i] = (a[i] + b[i]);");
  let src = Option.get (B.generate_source ~block:(F.dims_1d 128) vec_add) in
  Alcotest.(check bool) "launch bounds" true (contains src "__launch_bounds__(128)");
  let src = Option.get (B.generate_source swap_norm) in
  Alcotest.(check bool) "record type" true (contains src "Geo_point");
  let soa = Option.get (B.generate_source ~soa_params:[ "pts" ] swap_norm) in
  Alcotest.(check bool) (Printf.sprintf "SoA leaves in:\n%s" soa) true
    (contains soa "pts_x" && contains soa "pts_y" && not (contains soa "Geo_point* __restrict__ pts"));
  (* the low level: the arguments of the SoA form *)
  let info = Hipd.generate_source (B.connection ()) ~soa_params:[ "pts" ] (I.encode swap_norm) in
  let args = List.init (Hipd.Info.length info "arguments") (fun i -> Hipd.Info.string info (Printf.sprintf "arguments.%d.role" i)) in
  Alcotest.(check (list string)) "SoA roles" [ "leaf"; "leaf"; "length"; "array"; "length" ] args;
  (* malformed IR: hipd's EIR and where *)
  let bad = { vec_add with I.kern_body = I.SAssign (I.LVar (v "n" 3 I.TInt32), i32 1) } in
  check_error ~part:"immutable" Hipd.EIR (fun () -> B.generate_source bad);
  check_error ~part:"intrinsic" Hipd.EINTRINSIC (fun () ->
      B.generate_source { vec_add with I.kern_body = I.SExpr (I.EIntrinsic ([], "no_such_thing", [])) });
  (* what the encoder refuses itself *)
  Alcotest.check_raises "tuple pattern" (I.Encode_error "tuple patterns have no encoding (IR.md: differences)")
    (fun () -> ignore (I.encode { vec_add with I.kern_body = I.SMatch (i32 0, [ (I.PConstr ("tuple", []), I.SEmpty) ]) }))

(* The record kernel generated, compiled with the record parameter in SoA
   form, launched with the expanded arguments, checked. *)
let test_ir_soa_launch () =
  let d = dev () in
  let n = 100 in
  let k = B.Kernel.compile_ir d ~soa_params:[ "pts" ] swap_norm in
  Alcotest.(check (list string)) "argument kinds" [ "pointer"; "pointer"; "int32"; "pointer"; "int32" ]
    (List.map snd (B.Kernel.arguments k));
  let xs = Array1.init float32 c_layout n (fun i -> float_of_int i) in
  let ys = Array1.init float32 c_layout n (fun i -> float_of_int (2 * i)) in
  let bx = B.Memory.alloc d n float32 and by = B.Memory.alloc d n float32 in
  let bout = B.Memory.alloc d n float32 in
  B.Memory.host_to_device ~src:xs ~dst:bx;
  B.Memory.host_to_device ~src:ys ~dst:by;
  let args = B.Kernel.create_args () in
  B.Kernel.set_arg_buffer args 0 bx;
  B.Kernel.set_arg_buffer args 1 by;
  B.Kernel.set_arg_int32 args 2 (Int32.of_int n);
  B.Kernel.set_arg_buffer args 3 bout;
  B.Kernel.set_arg_int32 args 4 (Int32.of_int n);
  B.Kernel.launch k ~args ~grid:(dims 4) ~block:(dims 32) ~shared_mem:0 ~stream:None;
  let rx = Array1.create float32 c_layout n and ry = Array1.create float32 c_layout n in
  let out = Array1.create float32 c_layout n in
  B.Memory.device_to_host ~src:bx ~dst:rx;
  B.Memory.device_to_host ~src:by ~dst:ry;
  B.Memory.device_to_host ~src:bout ~dst:out;
  for i = 0 to n - 1 do
    let x = float_of_int i and y = float_of_int (2 * i) in
    Alcotest.(check (float 0.)) "x swapped" y rx.{i};
    Alcotest.(check (float 0.)) "y swapped" x ry.{i};
    Alcotest.(check (float 1e-3)) "norm" (Float.sqrt ((x *. x) +. (y *. y))) out.{i}
  done;
  (* the AoS argument list on the SoA kernel: hipd's ESIGNATURE *)
  let aos = B.Kernel.create_args () in
  B.Kernel.set_arg_buffer aos 0 bx;
  B.Kernel.set_arg_int32 aos 1 (Int32.of_int n);
  B.Kernel.set_arg_buffer aos 2 bout;
  B.Kernel.set_arg_int32 aos 3 (Int32.of_int n);
  check_error Hipd.ESIGNATURE (fun () ->
      B.Kernel.launch k ~args:aos ~grid:(dims 4) ~block:(dims 32) ~shared_mem:0 ~stream:None)

(* Variants, a match with binders, a helper whose params SPOC numbers from
   0 while its body uses other ids, a for loop over a mutable, a native
   block: encoded, compiled, run and checked. *)
let shape = I.TVariant ("shape", [ ("Circle", [ I.TFloat32 ]); ("Square", [ I.TFloat32 ]); ("Empty", []) ])

let areas =
  let s = v "s" 0 (I.TVec shape) and out = v "out" 1 (I.TVec I.TFloat32) in
  let i = v "i" 2 I.TInt32 and r = v "r" 3 I.TFloat32 and a = v "a" 4 I.TFloat32 in
  let acc = v ~mutable_:true "acc" 5 I.TFloat32 and k = v "k" 6 I.TInt32 in
  let x = v "x" 7 I.TFloat32 in
  let sq =
    { I.hf_name = "sq"; hf_params = [ v "x" 0 I.TFloat32 ]; hf_ret_type = I.TFloat32;
      hf_body = I.SReturn (I.EBinop (I.Mul, evar x, evar x)) }
  in
  let call e = I.EApp (I.EVar (v "sq" 0 I.TFloat32), [ e ]) in
  let f32 x = I.EConst (I.CFloat32 x) in
  let store e = I.SAssign (I.LArrayElem ("out", evar i), e) in
  I.kernel "areas" ~funcs:[ sq ]
    [ I.DParam (s, None); I.DParam (out, None) ]
    (I.SLet
       ( i, gid,
         I.SIf
           ( I.EBinop (I.Lt, evar i, I.EArrayLen "s"),
             I.SSeq
               [ I.SMatch
                   ( I.EArrayRead ("s", evar i),
                     [ (I.PConstr ("Circle", [ "r" ]), store (I.EBinop (I.Mul, f32 3., call (evar r))));
                       (I.PConstr ("Square", [ "a" ]),
                        (* a + a + a + a, by a loop over a mutable *)
                        I.SLetMut
                          ( acc, f32 0.,
                            I.SSeq
                              [ I.SFor (k, i32 1, i32 4, I.Upto,
                                  I.SAssign (I.LVar acc, I.EBinop (I.Add, evar acc, evar a)));
                                store (evar acc) ] ));
                       (I.PWild, store (f32 (-1.))) ] );
                 I.SNative
                   { gpu = (fun ~framework -> if framework = "hip" then "/* native hip */" else failwith "no");
                     ocaml = { I.run = (fun ~block:_ ~grid:_ _ -> ()) } };
                 I.SAssign (I.LArrayElem ("s", evar i), I.EVariant ("shape", "Empty", [])) ],
             None ) ))

let test_ir_variants () =
  let d = dev () in
  let src = Option.get (B.generate_source areas) in
  Alcotest.(check bool) "native code" true (contains src "/* native hip */");
  Alcotest.(check bool) "helper" true (contains src "sq(");
  let k = B.Kernel.compile_ir d areas in
  let n = 30 in
  (* shape: {int tag; union {float}} = 8 bytes, built as int32 pairs *)
  let host = Array1.create int32 c_layout (2 * n) in
  for j = 0 to n - 1 do
    host.{2 * j} <- Int32.of_int (j mod 3);
    host.{(2 * j) + 1} <- Int32.bits_of_float (float_of_int j)
  done;
  let bs : unit B.Memory.buffer = B.Memory.alloc_custom d ~size:n ~elem_size:8 in
  let bout = B.Memory.alloc d n float32 in
  B.Memory.host_ptr_to_device ~src_ptr:(Hipd.bigarray_address host) ~byte_size:(8 * n) ~dst:bs;
  let args = B.Kernel.create_args () in
  B.Kernel.set_arg_buffer args 0 bs;
  B.Kernel.set_arg_int32 args 1 (Int32.of_int n);
  B.Kernel.set_arg_buffer args 2 bout;
  B.Kernel.set_arg_int32 args 3 (Int32.of_int n);
  B.Kernel.launch k ~args ~grid:(dims 1) ~block:(dims 32) ~shared_mem:0 ~stream:None;
  let out = Array1.create float32 c_layout n in
  B.Memory.device_to_host ~src:bout ~dst:out;
  B.Memory.device_to_host_ptr ~src:bs ~dst_ptr:(Hipd.bigarray_address host) ~byte_size:(8 * n);
  for j = 0 to n - 1 do
    let x = float_of_int j in
    let expect = match j mod 3 with 0 -> 3. *. x *. x | 1 -> 4. *. x | _ -> -1. in
    Alcotest.(check (float 0.)) (Printf.sprintf "area %d" j) expect out.{j};
    Alcotest.(check int32) "cleared to Empty" 2l host.{2 * j}
  done

(* IR version 2: f16 and u8 make the document version 2. *)
let test_ir_v2 () =
  let h = v "h" 0 (I.TVec I.TFloat16) and o = v "o" 1 (I.TVec I.TUint8) in
  let i = v "i" 2 I.TInt32 in
  let k =
    I.kernel "halves" [ I.DParam (h, None); I.DParam (o, None) ]
      (I.SLet (i, gid,
         I.SIf (I.EBinop (I.Lt, evar i, I.EArrayLen "h"),
           I.SAssign (I.LArrayElem ("o", evar i),
             I.ECast (I.TUint8, I.ECast (I.TFloat32, I.EArrayRead ("h", evar i)))), None)))
  in
  let doc = I.encode k in
  Alcotest.(check char) "version byte" '\x02' doc.[4];
  let src = Option.get (B.generate_source k) in
  Alcotest.(check bool) "__half" true (contains src "__half");
  Alcotest.(check bool) "unsigned char" true (contains src "unsigned char");
  Alcotest.check_raises "version 1 refused" (I.Encode_error "the kernel needs IR version 2 (f16 or u8 types)")
    (fun () -> ignore (I.encode ~version:1 k))

(* ---------------------------------------------------------- intrinsics *)

let test_intrinsics () =
  let all = B.Intrinsics.list_all () in
  Alcotest.(check bool) "sin listed" true (List.mem "sin" all);
  Alcotest.(check bool) "thread_idx_x listed" true (List.mem "thread_idx_x" all);
  (match B.Intrinsics.find "sin" with
  | Some i -> Alcotest.(check int) "sin arity" 1 i.intr_arity
  | None -> Alcotest.fail "sin not found");
  Alcotest.(check bool) "unknown" true (B.Intrinsics.find "no_such_intrinsic" = None);
  B.Intrinsics.register "Test.triple"
    { B.intr_name = "Test.triple"; intr_code = "(3 * %s)"; intr_convergence = F.Uniform; intr_arity = 1 };
  (match B.Intrinsics.find "Test.triple" with
  | Some i -> Alcotest.(check string) "registered code" "(3 * %s)" i.intr_code
  | None -> Alcotest.fail "Test.triple not found");
  (* used in a kernel *)
  let k =
    { vec_add with
      I.kern_body =
        I.SLet
          ( v "i" 4 I.TInt32, gid,
            I.SIf
              ( I.EBinop (I.Lt, evar (v "i" 4 I.TInt32), evar (v "n" 3 I.TInt32)),
                I.SAssign
                  ( I.LArrayElem ("c", evar (v "i" 4 I.TInt32)),
                    I.EIntrinsic ([ "Test" ], "triple", [ I.EArrayRead ("a", evar (v "i" 4 I.TInt32)) ]) ),
                None ) ) }
  in
  let src = Option.get (B.generate_source k) in
  Alcotest.(check bool) "expansion" true (contains src "(3 * a[i])");
  check_error Hipd.EEXIST (fun () ->
      B.Intrinsics.register "sin" { B.intr_name = "sin"; intr_code = "x"; intr_convergence = F.Uniform; intr_arity = 1 })

(* ---------------------------------------------------------- run_source *)

let cuda_saxpy =
  "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, int n) {\n\
  \  int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
  \  if (i < n) y[i] = a * x[i] + y[i];\n}\n"

let test_run_source () =
  let d = dev () in
  B.Device.set_current d;
  Alcotest.(check bool) "supported" true (B.supported_source_langs = [ F.CUDA_Source ]);
  Alcotest.(check bool) "daemon lists cuda" true (List.mem "cuda" (B.source_langs ()));
  let n = 300 in
  let x = Array1.init float32 c_layout n float_of_int in
  let y = amake float32 n 1. in
  let bx = B.Memory.alloc d n float32 and by = B.Memory.alloc d n float32 in
  B.Memory.host_to_device ~src:x ~dst:bx;
  B.Memory.host_to_device ~src:y ~dst:by;
  let bind b =
    F.RSA_Buffer
      { binder =
          (fun ka i ->
            match B.unwrap_kargs ka with
            | Some a -> B.Kernel.set_arg_buffer a i b
            | None -> Alcotest.fail "kargs of another backend");
        length = n }
  in
  B.run_source ~source:cuda_saxpy ~lang:F.CUDA_Source ~kernel_name:"saxpy" ~block:(dims 128)
    ~grid:(dims 3) ~shared_mem:0
    [ F.RSA_Float32 2.; bind bx; bind by; F.RSA_Int32 (Int32.of_int n) ];
  let r = Array1.create float32 c_layout n in
  B.Memory.device_to_host ~src:by ~dst:r;
  for i = 0 to n - 1 do
    Alcotest.(check (float 0.)) "saxpy" ((2. *. float_of_int i) +. 1.) r.{i}
  done;
  check_error ~part:"opencl" Hipd.ELANG (fun () ->
      B.run_source ~source:cuda_saxpy ~lang:F.OpenCL_Source ~kernel_name:"saxpy" ~block:(dims 1)
        ~grid:(dims 1) ~shared_mem:0 [])

let test_execute_direct () =
  check_error ~part:"JIT" Hipd.ENOTSUP (fun () ->
      B.execute_direct ~native_fn:None ~ir:(Some vec_add) ~block:(dims 1) ~grid:(dims 1) [||])

let test_profiling () =
  B.enable_profiling ();
  let d = dev () in
  let b = B.Memory.alloc d 16 int32 in
  B.Memory.host_to_device ~src:(amake int32 16 7l) ~dst:b;
  let p = Hipd.session_profile (B.connection ()) () in
  Alcotest.(check bool) "enabled" true (Hipd.Info.bool p "enabled");
  Alcotest.(check bool) "records" true (Hipd.Info.length p "records" >= 1);
  B.disable_profiling ();
  let p = Hipd.session_profile (B.connection ()) () in
  Alcotest.(check bool) "disabled" false (Hipd.Info.bool p "enabled")

(* ----------------------------------------------- handles and connections *)

let test_foreign_stale () =
  let c1 = Hipd.connect () and c2 = Hipd.connect () in
  let b1 = Hipd.mem_alloc c1 ~kind:"float32" 8 in
  check_error ~part:"another session" Hipd.EFOREIGN (fun () -> Hipd.mem_size c2 b1);
  let k = Hipd.kernel_compile_cached c2 ~name:"busy" busy_source in
  check_error Hipd.EFOREIGN (fun () ->
      Hipd.kernel_run c2 k ~grid:(1, 1, 1) ~block:(1, 1, 1) [| Hipd.Buffer (b1, 0); Hipd.I32 8l; Hipd.I32 1l |]);
  Hipd.mem_free c1 b1;
  check_error Hipd.ESTALE (fun () -> Hipd.mem_size c1 b1);
  check_error Hipd.ESTALE (fun () -> Hipd.mem_free c1 b1);
  check_error Hipd.ENOENT (fun () -> Hipd.Info.int (Hipd.session_info c1) "no.such.field");
  check_error Hipd.EHANDLETYPE (fun () -> Hipd.Info.int (Hipd.session_info c1) "client");
  Hipd.close c1;
  Hipd.close c1;
  Alcotest.(check bool) "closed" true (Hipd.is_closed c1);
  check_error Hipd.EDISCONNECTED (fun () -> Hipd.device_count c1);
  Alcotest.(check bool) "other connection lives" true (Hipd.device_count c2 >= 1);
  check_error Hipd.ECONNECT (fun () -> Hipd.connect ~path:"/nonexistent/hipd.sock" ());
  Hipd.close c2

let test_two_connections () =
  let run (module X : Hipd_backend.S) scale results slot =
    let d = X.Device.get 0 in
    let n = 4096 in
    let k = X.Kernel.compile_cached d ~name:"saxpy" ~source:cuda_saxpy in
    let bx = X.Memory.alloc d n float32 and by = X.Memory.alloc d n float32 in
    let x = Array1.init float32 c_layout n float_of_int in
    let ok = ref true in
    for round = 1 to 20 do
      X.Memory.host_to_device ~src:x ~dst:bx;
      X.Memory.host_to_device ~src:(amake float32 n 0.) ~dst:by;
      let a = X.Kernel.create_args () in
      X.Kernel.set_arg_float32 a 0 (scale *. float_of_int round);
      X.Kernel.set_arg_buffer a 1 bx;
      X.Kernel.set_arg_buffer a 2 by;
      X.Kernel.set_arg_int32 a 3 (Int32.of_int n);
      X.Kernel.launch k ~args:a ~grid:(dims 16) ~block:(dims 256) ~shared_mem:0 ~stream:None;
      let r = Array1.create float32 c_layout n in
      X.Memory.device_to_host ~src:by ~dst:r;
      if r.{n - 1} <> scale *. float_of_int round *. float_of_int (n - 1) then ok := false
    done;
    results.(slot) <- !ok
  in
  let results = [| false; false |] in
  let t1 = Thread.create (fun () -> run (module B) 1. results 0) () in
  let t2 = Thread.create (fun () -> run (module B2) 3. results 1) () in
  Thread.join t1;
  Thread.join t2;
  Alcotest.(check (array bool)) "both right" [| true; true |] results;
  let s1 = Hipd.Info.int (Hipd.session_info (B.connection ())) "id" in
  let s2 = Hipd.Info.int (Hipd.session_info (B2.connection ())) "id" in
  Alcotest.(check bool) "two sessions" true (s1 <> s2);
  Alcotest.(check string) "client name" "second" (Hipd.Info.string (Hipd.session_info (B2.connection ())) "client");
  (* a buffer of one backend's connection on the other's *)
  let b = B.Memory.alloc (B.Device.get 0) 4 float32 in
  check_error Hipd.EFOREIGN (fun () -> Hipd.mem_size (B2.connection ()) (B.Memory.handle b))

(* Calls from several threads on one connection: the runtime lock is
   released while each waits, and the answers do not mix. *)
let test_threads () =
  let conn = Hipd.connect () in
  let errors = ref 0 and m = Mutex.create () in
  let worker id () =
    let n = 1024 + id in
    let b = Hipd.mem_alloc conn ~kind:"int32" n in
    let src = Array1.init int32 c_layout n (fun i -> Int32.of_int ((id * 100000) + i)) in
    let dst = Array1.create int32 c_layout n in
    for _ = 1 to 50 do
      Hipd.mem_write conn b src;
      Hipd.mem_read conn b dst;
      if src <> dst then (Mutex.lock m; incr errors; Mutex.unlock m)
    done;
    Hipd.mem_free conn b
  in
  let ts = List.init 4 (fun id -> Thread.create (worker id) ()) in
  List.iter Thread.join ts;
  Alcotest.(check int) "no mixed answers" 0 !errors;
  (* close while another thread is in a call: it waits, then later calls fail *)
  let t = Thread.create (fun () -> try ignore (Hipd.device_count conn) with Hipd.Error _ -> ()) () in
  Hipd.close conn;
  Thread.join t;
  check_error Hipd.EDISCONNECTED (fun () -> Hipd.mem_alloc conn ~kind:"int32" 1)

let () =
  Alcotest.run "hipd"
    [ ( "errors", [ Alcotest.test_case "codes" `Quick test_codes ] );
      ( "backend",
        [ Alcotest.test_case "identity" `Quick test_identity;
          Alcotest.test_case "devices" `Quick test_devices;
          Alcotest.test_case "streams" `Quick test_streams;
          Alcotest.test_case "profiling" `Quick test_profiling;
          Alcotest.test_case "execute_direct" `Quick test_execute_direct ] );
      ( "memory",
        [ Alcotest.test_case "every Bigarray kind" `Quick test_kinds;
          Alcotest.test_case "custom, raw, device to device" `Quick test_memory;
          Alcotest.test_case "shared memory and zero copy" `Quick test_shm;
          Alcotest.test_case "finalisers" `Quick test_gc ] );
      ( "kernels",
        [ Alcotest.test_case "compile and launch" `Quick test_kernels;
          Alcotest.test_case "bad dims" `Quick test_bad_dims;
          Alcotest.test_case "compile error" `Quick test_compile_error;
          Alcotest.test_case "events" `Quick test_events;
          Alcotest.test_case "run_source cuda" `Quick test_run_source;
          Alcotest.test_case "intrinsics" `Quick test_intrinsics ] );
      ( "ir",
        [ Alcotest.test_case "msgpack" `Quick test_msgpack;
          Alcotest.test_case "generate_source" `Quick test_generate;
          Alcotest.test_case "record in SoA, launched" `Quick test_ir_soa_launch;
          Alcotest.test_case "variants, helpers, native" `Quick test_ir_variants;
          Alcotest.test_case "version 2" `Quick test_ir_v2 ] );
      ( "connections",
        [ Alcotest.test_case "foreign and stale" `Quick test_foreign_stale;
          Alcotest.test_case "two at once" `Quick test_two_connections;
          Alcotest.test_case "threads" `Quick test_threads ] ) ]
