(* SPDX-License-Identifier: MIT *)
(* bindings/ocaml/src/hipd_backend.ml: SPOC's backend signature over a hipd
   connection (see the .mli). *)

open Hipd_framework

module type S = sig
  val name : string
  val version : int * int * int
  val is_available : unit -> bool
  val execution_model : execution_model
  val connection : unit -> Hipd.conn

  module Device : sig
    type t
    type id = int

    val init : unit -> unit
    val count : unit -> int
    val get : int -> t
    val id : t -> id
    val name : t -> string
    val capabilities : t -> capabilities
    val arch : t -> string
    val set_current : t -> unit
    val synchronize : t -> unit
  end

  module Stream : sig
    type t = Hipd.stream

    val create : Device.t -> t
    val destroy : t -> unit
    val synchronize : t -> unit
    val default : Device.t -> t
  end

  module Memory : sig
    type 'a buffer

    val alloc : Device.t -> int -> ('a, 'b) Bigarray.kind -> 'a buffer
    val alloc_custom : Device.t -> size:int -> elem_size:int -> 'a buffer

    val host_array :
      Device.t -> ('a, 'b) Bigarray.kind -> int -> ('a, 'b, Bigarray.c_layout) Bigarray.Array1.t

    val alloc_zero_copy :
      Device.t -> ('a, 'b, Bigarray.c_layout) Bigarray.Array1.t ->
      ('a, 'b) Bigarray.kind -> 'a buffer option

    val free : 'a buffer -> unit
    val host_to_device : src:('a, 'b, Bigarray.c_layout) Bigarray.Array1.t -> dst:'a buffer -> unit
    val device_to_host : src:'a buffer -> dst:('a, 'b, Bigarray.c_layout) Bigarray.Array1.t -> unit
    val host_ptr_to_device : src_ptr:nativeint -> byte_size:int -> dst:'a buffer -> unit
    val device_to_host_ptr : src:'a buffer -> dst_ptr:nativeint -> byte_size:int -> unit
    val device_to_device : src:'a buffer -> dst:'a buffer -> unit
    val size : 'a buffer -> int
    val device_ptr : 'a buffer -> nativeint
    val is_zero_copy : 'a buffer -> bool
    val handle : 'a buffer -> Hipd.buffer
  end

  module Event : sig
    type t = Hipd.event

    val create : unit -> t
    val destroy : t -> unit
    val record : t -> Stream.t -> unit
    val synchronize : t -> unit
    val elapsed : start:t -> stop:t -> float
  end

  module Kernel : sig
    type t
    type args

    val compile : Device.t -> name:string -> source:string -> t
    val compile_cached : Device.t -> name:string -> source:string -> t
    val clear_cache : unit -> unit
    val compile_ir : Device.t -> ?block:dims -> ?soa_params:string list -> Hipd_ir.kernel -> t
    val arguments : t -> (string * string) list
    val create_args : unit -> args
    val set_arg_buffer : args -> int -> _ Memory.buffer -> unit
    val set_arg_int32 : args -> int -> int32 -> unit
    val set_arg_int64 : args -> int -> int64 -> unit
    val set_arg_float32 : args -> int -> float -> unit
    val set_arg_float64 : args -> int -> float -> unit
    val set_arg_ptr : args -> int -> nativeint -> unit

    val launch :
      t -> args:args -> grid:dims -> block:dims -> shared_mem:int ->
      stream:Stream.t option -> unit
  end

  val enable_profiling : unit -> unit
  val disable_profiling : unit -> unit
  val generate_source : ?block:dims -> ?soa_params:string list -> Hipd_ir.kernel -> string option

  val execute_direct :
    native_fn:(block:dims -> grid:dims -> exec_arg array -> unit) option ->
    ir:Hipd_ir.kernel option -> block:dims -> grid:dims -> exec_arg array -> unit

  type intrinsic = {
    intr_name : string;
    intr_code : string;
    intr_convergence : convergence;
    intr_arity : int;
  }

  module Intrinsics : INTRINSIC_REGISTRY with type intrinsic_impl = intrinsic

  val supported_source_langs : source_lang list
  val source_langs : unit -> string list

  val run_source :
    source:string -> lang:source_lang -> kernel_name:string -> block:dims ->
    grid:dims -> shared_mem:int -> run_source_arg list -> unit

  val wrap_kargs : Kernel.args -> kargs
  val unwrap_kargs : kargs -> Kernel.args option
end

module type CONNECTION = sig
  val connection : unit -> Hipd.conn
end

let tuple3 (d : dims) = (d.x, d.y, d.z)

(* A mutex of the C side (the library does not need the threads library). *)
module Lock = struct
  type t

  external create : unit -> t = "hipd_ml_lock_create"
  external acquire : t -> unit = "hipd_ml_lock_acquire"
  external release : t -> unit = "hipd_ml_lock_release"

  let protect l f =
    acquire l;
    match f () with
    | x -> release l; x
    | exception e -> release l; raise e
end

module Make (C : CONNECTION) : S = struct
  let name = "hip"
  let execution_model = JIT
  let connection = C.connection

  (* The client library's version: the module's value cannot wait for a
     connection (the daemon's is in [backend.info]). *)
  let version =
    match List.map int_of_string_opt (String.split_on_char '.' (Hipd.version ())) with
    | [ Some a; Some b; Some c ] -> (a, b, c)
    | _ -> (0, 0, 0)

  let is_available () =
    match Hipd.backend_info (connection ()) with
    | i -> Hipd.Info.bool i "available"
    | exception Hipd.Error _ -> false

  let current = ref 0

  module Device = struct
    type id = int

    type t = {
      id : int;
      name : string;
      arch : string;
      caps : capabilities;
    }

    let init () = current := Hipd.device_current (connection ())
    let count () = Hipd.device_count (connection ())

    let get i =
      let r = Hipd.device_get (connection ()) ~device:i () in
      let ci p = Hipd.Info.int r ("capabilities." ^ p) in
      let cb p = Hipd.Info.bool r ("capabilities." ^ p) in
      let c3 p = (ci (p ^ ".0"), ci (p ^ ".1"), ci (p ^ ".2")) in
      {
        id = Hipd.Info.int r "id";
        name = Hipd.Info.string r "name";
        arch = Hipd.Info.string r "arch";
        caps =
          {
            max_threads_per_block = ci "max_threads_per_block";
            max_block_dims = c3 "max_block_dims";
            max_grid_dims = c3 "max_grid_dims";
            shared_mem_per_block = ci "shared_mem_per_block";
            total_global_mem = Hipd.Info.int64 r "capabilities.total_global_mem";
            compute_capability = (ci "compute_capability.0", ci "compute_capability.1");
            supports_fp64 = cb "supports_fp64";
            supports_atomics = cb "supports_atomics";
            warp_size = ci "warp_size";
            max_registers_per_block = ci "max_registers_per_block";
            clock_rate_khz = ci "clock_rate_khz";
            multiprocessor_count = ci "multiprocessor_count";
            is_cpu = cb "is_cpu";
          };
      }

    let id d = d.id
    let name d = d.name
    let capabilities d = d.caps
    let arch d = d.arch

    let set_current d =
      Hipd.device_set_current (connection ()) d.id;
      current := d.id

    let synchronize d = Hipd.device_synchronize (connection ()) ~device:d.id ()
  end

  module Stream = struct
    type t = Hipd.stream

    let create (d : Device.t) = Hipd.stream_create (connection ()) ~device:d.id ()
    let destroy s = Hipd.stream_destroy (Hipd.stream_conn s) s
    let synchronize s = Hipd.stream_synchronize (Hipd.stream_conn s) s
    let default (d : Device.t) = Hipd.stream_default (connection ()) ~device:d.id ()
  end

  module Memory = struct
    (* The host array a zero-copy buffer is made of, kept alive with it. *)
    type host = Host : ('a, 'b, 'c) Bigarray.Array1.t -> host

    type 'a buffer = {
      buf : Hipd.buffer;
      conn : Hipd.conn;
      count : int;
      elem_size : int;
      host : host option;
    }

    let make conn buf count elem_size host = { buf; conn; count; elem_size; host }

    let alloc (d : Device.t) n kind =
      let c = connection () in
      make c (Hipd.mem_alloc c ~device:d.id ~kind:(Hipd.kind_name kind) n) n
        (Bigarray.kind_size_in_bytes kind) None

    let alloc_custom (d : Device.t) ~size ~elem_size =
      let c = connection () in
      make c (Hipd.mem_alloc_custom c ~device:d.id ~elem_size size) size elem_size None

    let host_array (_ : Device.t) kind n = Hipd.Shm.create (connection ()) kind n

    let alloc_zero_copy (d : Device.t) ba kind =
      let c = connection () in
      if not (Hipd.Shm.is_shared c ba) then None
      else
        match Hipd.mem_alloc_zero_copy c ~device:d.id ba with
        | b -> Some (make c b (Bigarray.Array1.dim ba) (Bigarray.kind_size_in_bytes kind) (Some (Host ba)))
        | exception Hipd.Error (Hipd.ENOTSUP, _) -> None

    let free b = Hipd.mem_free b.conn b.buf

    (* The host array is the buffer's own memory: nothing to move. *)
    let same_memory b ba =
      match b.host with
      | Some (Host h) -> Hipd.bigarray_address h = Hipd.bigarray_address ba
      | None -> false

    let host_to_device ~src ~dst =
      if not (same_memory dst src) then Hipd.mem_write dst.conn dst.buf src

    let device_to_host ~src ~dst =
      if not (same_memory src dst) then Hipd.mem_read src.conn src.buf dst

    let host_ptr_to_device ~src_ptr ~byte_size ~dst =
      Hipd.mem_write_ptr dst.conn dst.buf src_ptr byte_size

    let device_to_host_ptr ~src ~dst_ptr ~byte_size =
      Hipd.mem_read_ptr src.conn src.buf dst_ptr byte_size

    let device_to_device ~src ~dst =
      Hipd.mem_copy dst.conn ~dst:dst.buf ~src:src.buf (src.count * src.elem_size)

    let size b = b.count

    let device_ptr b =
      Int64.to_nativeint (Hipd.Info.int64 (Hipd.mem_info b.conn b.buf) "device_ptr")

    let is_zero_copy b = b.host <> None
    let handle b = b.buf
  end

  module Event = struct
    type t = Hipd.event

    let create () = Hipd.event_create (connection ()) ~device:!current ()
    let destroy e = Hipd.event_destroy (Hipd.event_conn e) e
    let record e s = Hipd.event_record (Hipd.event_conn e) e ~stream:s ()
    let synchronize e = Hipd.event_synchronize (Hipd.event_conn e) e
    let elapsed ~start ~stop = Hipd.event_elapsed (Hipd.event_conn start) ~start ~stop
  end

  module Kernel = struct
    type t = { k : Hipd.kernel; arguments : (string * string) list }
    type args = { mutable slots : Hipd.arg option array }

    let compile (d : Device.t) ~name ~source =
      { k = Hipd.kernel_compile (connection ()) ~device:d.id ~name source; arguments = [] }

    (* Kernels compiled through the cache, per device, name and source.
       Guarded: a systhread may be switched out inside a Hashtbl operation
       (at an allocation), and another may then use the table. *)
    let kept : (int * string * string, t) Hashtbl.t = Hashtbl.create 16
    let kept_lock = Lock.create ()
    let with_kept f = Lock.protect kept_lock f

    let compile_cached (d : Device.t) ~name ~source =
      match with_kept (fun () -> Hashtbl.find_opt kept (d.id, name, source)) with
      | Some k -> k
      | None ->
          (* Compiled outside the lock: other threads go on meanwhile; two
             threads compiling the same kernel both get a valid one. *)
          let k =
            { k = Hipd.kernel_compile_cached (connection ()) ~device:d.id ~name source; arguments = [] }
          in
          with_kept (fun () ->
              match Hashtbl.find_opt kept (d.id, name, source) with
              | Some k' -> k'
              | None -> Hashtbl.replace kept (d.id, name, source) k; k)

    let clear_cache () =
      with_kept (fun () -> Hashtbl.reset kept);
      match Hipd.cache_clear (connection ()) with
      | () -> ()
      | exception Hipd.Error (Hipd.EPERM, _) -> ()

    let compile_ir (d : Device.t) ?block ?(soa_params = []) ir =
      let block = Option.map tuple3 block in
      let k, info =
        Hipd.kernel_compile_ir (connection ()) ~device:d.id ?block ~soa_params (Hipd_ir.encode ir)
      in
      let n = Hipd.Info.length info "arguments" in
      let arguments =
        List.init n (fun i ->
            let f s = Printf.sprintf "arguments.%d.%s" i s in
            (Hipd.Info.string info (f "name"), Hipd.Info.string info (f "type")))
      in
      { k; arguments }

    let arguments k = k.arguments
    let create_args () = { slots = [||] }

    let set a i v =
      if i < 0 then raise (Hipd.Error (Hipd.EINVAL, Printf.sprintf "kernel args: position %d" i));
      if i >= Array.length a.slots then begin
        let s = Array.make (max (i + 1) (2 * Array.length a.slots)) None in
        Array.blit a.slots 0 s 0 (Array.length a.slots);
        a.slots <- s
      end;
      a.slots.(i) <- Some v

    let set_arg_buffer a i (b : _ Memory.buffer) = set a i (Hipd.Buffer (b.buf, 0))
    let set_arg_int32 a i v = set a i (Hipd.I32 v)
    let set_arg_int64 a i v = set a i (Hipd.I64 v)
    let set_arg_float32 a i v = set a i (Hipd.F32 v)
    let set_arg_float64 a i v = set a i (Hipd.F64 v)
    let set_arg_ptr a i v = set a i (Hipd.Ptr (Int64.of_nativeint v))

    let to_array a =
      (* The positions set, up to the last: a gap is an error. *)
      let n = ref 0 in
      Array.iteri (fun i s -> if s <> None then n := i + 1) a.slots;
      Array.init !n (fun i ->
          match a.slots.(i) with
          | Some v -> v
          | None ->
              raise
                (Hipd.Error (Hipd.EINVAL, Printf.sprintf "kernel.launch: argument %d was never set" i)))

    let launch k ~args ~grid ~block ~shared_mem ~stream =
      Hipd.kernel_launch (Hipd.kernel_conn k.k) k.k ~grid:(tuple3 grid) ~block:(tuple3 block)
        ~shared_mem ?stream (to_array args)
  end

  let enable_profiling () = Hipd.profile_enable (connection ())
  let disable_profiling () = Hipd.profile_disable (connection ())

  let generate_source ?block ?(soa_params = []) ir =
    let block = Option.map tuple3 block in
    let info = Hipd.generate_source (connection ()) ?block ~soa_params (Hipd_ir.encode ir) in
    Some (Hipd.Info.string info "source")

  let execute_direct ~native_fn:_ ~ir:_ ~block:_ ~grid:_ _ = Hipd.execute_direct (connection ())

  type intrinsic = {
    intr_name : string;
    intr_code : string;
    intr_convergence : convergence;
    intr_arity : int;
  }

  module Intrinsics = struct
    type intrinsic_impl = intrinsic

    let conv_to = function Uniform -> Hipd.Uniform | Divergent -> Hipd.Divergent | Sync -> Hipd.Sync
    let conv_of = function Hipd.Uniform -> Uniform | Hipd.Divergent -> Divergent | Hipd.Sync -> Sync

    let register name (i : intrinsic_impl) =
      Hipd.intrinsics_register (connection ()) ~name ~code:i.intr_code
        ~convergence:(conv_to i.intr_convergence) ~arity:i.intr_arity

    let find name =
      match Hipd.intrinsics_find (connection ()) ~device:!current name with
      | (i : Hipd.intrinsic) :: _ ->
          Some
            {
              intr_name = i.name;
              intr_code = i.code;
              intr_convergence = conv_of i.convergence;
              intr_arity = Option.value i.arity ~default:(-1);
            }
      | [] -> None
      | exception Hipd.Error (Hipd.ENOENT, _) -> None

    let list_all () =
      Hipd.intrinsics_list (connection ()) ~device:!current ()
      |> List.map (fun (i : Hipd.intrinsic) -> i.name)
      |> List.sort_uniq compare
  end

  let supported_source_langs = [ CUDA_Source ]
  let source_langs () = Hipd.supported_source_langs (connection ()) ()

  let lang_name = function
    | CUDA_Source -> "cuda"
    | OpenCL_Source -> "opencl"
    | PTX -> "ptx"
    | SPIR_V -> "spirv"
    | GLSL_Source -> "glsl"

  type kargs += Hipd_kargs of Kernel.args

  let wrap_kargs a = Hipd_kargs a
  let unwrap_kargs = function Hipd_kargs a -> Some a | _ -> None

  let run_source ~source ~lang ~kernel_name ~block ~grid ~shared_mem args =
    let a = Kernel.create_args () in
    List.iteri
      (fun i -> function
        | RSA_Buffer { binder; _ } -> binder (Hipd_kargs a) i
        | RSA_Int32 v -> Kernel.set_arg_int32 a i v
        | RSA_Int64 v -> Kernel.set_arg_int64 a i v
        | RSA_Float32 v -> Kernel.set_arg_float32 a i v
        | RSA_Float64 v -> Kernel.set_arg_float64 a i v)
      args;
    Hipd.run_source (connection ()) ~source ~lang:(lang_name lang) ~kernel_name
      ~grid:(tuple3 grid) ~block:(tuple3 block) ~shared_mem (Kernel.to_array a)
end

(* The default connection, opened on first use. *)
let default_conn : Hipd.conn option ref = ref None
let default_lock = Lock.create ()
let set_connection c = Lock.protect default_lock (fun () -> default_conn := Some c)

let default_connection () =
  Lock.protect default_lock (fun () ->
      match !default_conn with
      | Some c when not (Hipd.is_closed c) -> c
      | _ ->
          let c = Hipd.connect () in
          default_conn := Some c;
          c)

include Make (struct
  let connection = default_connection
end)
