(* SPDX-License-Identifier: MIT *)
(* bindings/ocaml/src/hipd.ml: the connection-level binding of libhipd
   (hipd_ml_stubs.c does the C side). *)

type code =
  | EINVAL
  | ENOMEM
  | EPROTO
  | EMSGSIZE
  | ENOMETHOD
  | EPARAMS
  | EHANDLE
  | ESTALE
  | EFOREIGN
  | EHANDLETYPE
  | EDISCONNECTED
  | ECONNECT
  | ETIMEDOUT
  | EVERSION
  | EHELLO
  | ESHUTDOWN
  | EIO
  | ENODEV
  | ERANGE
  | EQUOTA
  | EDEVICE
  | ENOTSUP
  | ENOTREADY
  | ENOTRECORDED
  | ECOMPILE
  | ENOKERNEL
  | ELAUNCH
  | ELIMIT
  | EDEVLOST
  | ELANG
  | EIR
  | EINTRINSIC
  | ESIGNATURE
  | ETOOMANY
  | EBUSY
  | ECANCELED
  | EEXIST
  | ENOENT
  | EPERM
  | EINTERNAL
  | Unknown_code of int

exception Error of code * string

let () = Callback.register_exception "hipd.error" (Error (EINVAL, ""))

(* In the order of HIPD_ERRNO_MAP: the constructor at index i is the code
   -(i + 1), which is how the C side builds them. *)
let codes =
  [| (EINVAL, "EINVAL"); (ENOMEM, "ENOMEM"); (EPROTO, "EPROTO");
     (EMSGSIZE, "EMSGSIZE"); (ENOMETHOD, "ENOMETHOD"); (EPARAMS, "EPARAMS");
     (EHANDLE, "EHANDLE"); (ESTALE, "ESTALE"); (EFOREIGN, "EFOREIGN");
     (EHANDLETYPE, "EHANDLETYPE"); (EDISCONNECTED, "EDISCONNECTED");
     (ECONNECT, "ECONNECT"); (ETIMEDOUT, "ETIMEDOUT"); (EVERSION, "EVERSION");
     (EHELLO, "EHELLO"); (ESHUTDOWN, "ESHUTDOWN"); (EIO, "EIO");
     (ENODEV, "ENODEV"); (ERANGE, "ERANGE"); (EQUOTA, "EQUOTA");
     (EDEVICE, "EDEVICE"); (ENOTSUP, "ENOTSUP"); (ENOTREADY, "ENOTREADY");
     (ENOTRECORDED, "ENOTRECORDED"); (ECOMPILE, "ECOMPILE");
     (ENOKERNEL, "ENOKERNEL"); (ELAUNCH, "ELAUNCH"); (ELIMIT, "ELIMIT");
     (EDEVLOST, "EDEVLOST"); (ELANG, "ELANG"); (EIR, "EIR");
     (EINTRINSIC, "EINTRINSIC"); (ESIGNATURE, "ESIGNATURE");
     (ETOOMANY, "ETOOMANY"); (EBUSY, "EBUSY"); (ECANCELED, "ECANCELED");
     (EEXIST, "EEXIST"); (ENOENT, "ENOENT"); (EPERM, "EPERM");
     (EINTERNAL, "EINTERNAL") |]

let code_to_int = function
  | Unknown_code n -> n
  | c ->
      let rec find i = if fst codes.(i) = c then -(i + 1) else find (i + 1) in
      find 0

let code_of_int n =
  if n <= -1 && n >= -Array.length codes then fst codes.(-n - 1)
  else Unknown_code n

let code_name = function
  | Unknown_code _ -> "UNKNOWN"
  | c -> snd codes.(-code_to_int c - 1)

let code_of_name s =
  Array.fold_left
    (fun acc (c, n) -> if acc = None && n = s then Some c else acc)
    None codes

external c_err_name : int -> string = "hipd_ml_err_name"
external c_strerror : int -> string = "hipd_ml_strerror"

let strerror c = c_strerror (code_to_int c)

let () =
  Printexc.register_printer (function
    | Error (c, msg) -> Some (Printf.sprintf "Hipd.Error (%s, %S)" (code_name c) msg)
    | _ -> None)

external version : unit -> string = "hipd_ml_version"
external protocol_version : unit -> int = "hipd_ml_protocol_version"

(* --------------------------------------------------------- connections *)

type conn

external connect_ : string option -> string option -> conn = "hipd_ml_connect"
external close : conn -> unit = "hipd_ml_close"
external is_closed : conn -> bool = "hipd_ml_is_closed"
external set_timeout : conn -> int -> unit = "hipd_ml_set_timeout"

let connect ?path ?client_name () = connect_ path client_name

let with_connection ?path f =
  let c = connect ?path () in
  Fun.protect ~finally:(fun () -> close c) (fun () -> f c)

(* ------------------------------------------------------------- records *)

module Info = struct
  type t

  external int64 : t -> string -> int64 = "hipd_ml_info_int"
  external float : t -> string -> float = "hipd_ml_info_double"
  external bool : t -> string -> bool = "hipd_ml_info_bool"
  external string : t -> string -> string = "hipd_ml_info_str"
  external length : t -> string -> int = "hipd_ml_info_len"
  external to_string : t -> string = "hipd_ml_info_format"

  let int t p = Int64.to_int (int64 t p)

  let has t p =
    match ignore (string t p) with
    | () -> true
    | exception Error (ENOENT, _) -> false
    | exception Error (_, _) -> true
end

external hello : conn -> Info.t = "hipd_ml_hello"
external backend_info : conn -> Info.t = "hipd_ml_backend_info"
external session_info : conn -> Info.t = "hipd_ml_session_info"

(* ------------------------------------------------------------- handles *)

type handle
type buffer = handle
type stream = handle
type event = handle
type kernel = handle

external handle_id : handle -> int64 = "hipd_ml_handle_id"
external handle_conn : handle -> conn = "hipd_ml_handle_conn"
external handle_free : conn -> handle -> unit = "hipd_ml_handle_free"

let buffer_id = handle_id
let stream_id = handle_id
let event_id = handle_id
let kernel_id = handle_id
let buffer_conn = handle_conn
let stream_conn = handle_conn
let event_conn = handle_conn
let kernel_conn = handle_conn

(* ------------------------------------------------------------- devices *)

external device_count : conn -> int = "hipd_ml_device_count"
external device_list : conn -> Info.t = "hipd_ml_device_list"
external device_get_ : conn -> int option -> Info.t = "hipd_ml_device_get"
external device_set_current : conn -> int -> unit = "hipd_ml_device_set_current"
external device_current : conn -> int = "hipd_ml_device_current"
external device_synchronize_ : conn -> int option -> unit = "hipd_ml_device_synchronize"

let device_get c ?device () = device_get_ c device
let device_synchronize c ?device () = device_synchronize_ c device

(* ------------------------------------------------------------- streams *)

external stream_create_ : conn -> int option -> stream = "hipd_ml_stream_create"
external stream_default_ : conn -> int option -> stream = "hipd_ml_stream_default"
external stream_synchronize : conn -> stream -> unit = "hipd_ml_stream_synchronize"
external stream_query : conn -> stream -> bool = "hipd_ml_stream_query"

let stream_create c ?device () = stream_create_ c device
let stream_default c ?device () = stream_default_ c device
let stream_destroy = handle_free

(* -------------------------------------------------------------- memory *)

let kind_name : type a b. (a, b) Bigarray.kind -> string = function
  | Bigarray.Float32 -> "float32"
  | Bigarray.Float64 -> "float64"
  | Bigarray.Int8_signed -> "int8"
  | Bigarray.Int8_unsigned -> "uint8"
  | Bigarray.Int16_signed -> "int16"
  | Bigarray.Int16_unsigned -> "uint16"
  | Bigarray.Int32 -> "int32"
  | Bigarray.Int64 -> "int64"
  | Bigarray.Int -> "int64"
  | Bigarray.Nativeint -> "int64"
  | Bigarray.Complex32 -> "complex32"
  | Bigarray.Complex64 -> "complex64"
  | Bigarray.Char -> "char"

(* The runtime's numbering of Bigarray kinds (caml/bigarray.h). *)
let kind_code : type a b. (a, b) Bigarray.kind -> int = function
  | Bigarray.Float32 -> 0
  | Bigarray.Float64 -> 1
  | Bigarray.Int8_signed -> 2
  | Bigarray.Int8_unsigned -> 3
  | Bigarray.Int16_signed -> 4
  | Bigarray.Int16_unsigned -> 5
  | Bigarray.Int32 -> 6
  | Bigarray.Int64 -> 7
  | Bigarray.Int -> 8
  | Bigarray.Nativeint -> 9
  | Bigarray.Complex32 -> 10
  | Bigarray.Complex64 -> 11
  | Bigarray.Char -> 12

external mem_alloc_ : conn -> int option -> int -> string -> buffer = "hipd_ml_mem_alloc"

external mem_alloc_custom_ : conn -> int option -> int -> int -> buffer
  = "hipd_ml_mem_alloc_custom"

external mem_size : conn -> buffer -> int = "hipd_ml_mem_size"
external mem_info : conn -> buffer -> Info.t = "hipd_ml_mem_info"

let mem_alloc c ?device ~kind n = mem_alloc_ c device n kind
let mem_alloc_custom c ?device ~elem_size n = mem_alloc_custom_ c device n elem_size
let mem_free = handle_free

(* conn buf offset bigarray pos len (-1: to the end) dir (0 write, 1 read)
   mode (0 auto, 1 inline only) *)
external mem_transfer :
  conn -> buffer -> int -> ('a, 'b, 'c) Bigarray.Array1.t -> int -> int -> int ->
  int -> unit = "hipd_ml_mem_transfer_bc" "hipd_ml_mem_transfer"

external mem_transfer_async :
  conn -> buffer -> int -> ('a, 'b, 'c) Bigarray.Array1.t -> int -> stream -> unit
  = "hipd_ml_mem_transfer_async_bc" "hipd_ml_mem_transfer_async"

external mem_transfer_ptr : conn -> buffer -> int -> nativeint -> int -> int -> unit
  = "hipd_ml_mem_transfer_ptr_bc" "hipd_ml_mem_transfer_ptr"

external bigarray_address : ('a, 'b, 'c) Bigarray.Array1.t -> nativeint
  = "hipd_ml_ba_address"

(* [len] None is -1: to the end of the Bigarray. *)
let len_arg meth = function
  | None -> -1
  | Some n when n < 0 -> raise (Error (EINVAL, Printf.sprintf "%s: len %d is negative" meth n))
  | Some n -> n

let mem_write c b ?(offset = 0) ?(pos = 0) ?len ba =
  mem_transfer c b offset ba pos (len_arg "mem.write" len) 0 0

let mem_read c b ?(offset = 0) ?(pos = 0) ?len ba =
  mem_transfer c b offset ba pos (len_arg "mem.read" len) 1 0

let mem_write_inline c b ?(offset = 0) ba = mem_transfer c b offset ba 0 (-1) 0 1
let mem_read_inline c b ?(offset = 0) ba = mem_transfer c b offset ba 0 (-1) 1 1
let mem_write_async c b ?(offset = 0) ba s = mem_transfer_async c b offset ba 0 s
let mem_read_async c b ?(offset = 0) ba s = mem_transfer_async c b offset ba 1 s
let mem_write_ptr c b ?(offset = 0) p n = mem_transfer_ptr c b offset p n 0
let mem_read_ptr c b ?(offset = 0) p n = mem_transfer_ptr c b offset p n 1

external mem_copy_ : conn -> buffer -> int -> buffer -> int -> int -> unit
  = "hipd_ml_mem_copy_bc" "hipd_ml_mem_copy"

let mem_copy c ~dst ?(dst_offset = 0) ~src ?(src_offset = 0) len =
  mem_copy_ c dst dst_offset src src_offset len

external mem_memset_ : conn -> buffer -> int -> int -> int -> unit = "hipd_ml_mem_memset"

let mem_memset c b ?(offset = 0) ~len byte = mem_memset_ c b offset len byte

module Shm = struct
  external create_ : conn -> int -> int -> ('a, 'b, Bigarray.c_layout) Bigarray.Array1.t
    = "hipd_ml_shm_create"

  external is_shared : conn -> ('a, 'b, 'c) Bigarray.Array1.t -> bool
    = "hipd_ml_shm_is_shared"

  let create c kind n = create_ c (kind_code kind) n
end

external mem_alloc_zero_copy_ : conn -> int option -> ('a, 'b, 'c) Bigarray.Array1.t -> buffer
  = "hipd_ml_mem_alloc_zero_copy"

let mem_alloc_zero_copy c ?device ba = mem_alloc_zero_copy_ c device ba

(* -------------------------------------------------------------- events *)

external event_create_ : conn -> int option -> event = "hipd_ml_event_create"
external event_record_ : conn -> event -> stream option -> unit = "hipd_ml_event_record"
external event_query : conn -> event -> bool = "hipd_ml_event_query"
external event_synchronize : conn -> event -> unit = "hipd_ml_event_synchronize"
external event_elapsed_ : conn -> event -> event -> float = "hipd_ml_event_elapsed"

let event_create c ?device () = event_create_ c device
let event_destroy = handle_free
let event_record c e ?stream () = event_record_ c e stream
let event_elapsed c ~start ~stop = event_elapsed_ c start stop

(* ----------------------------------------------------------- profiling *)

external profile : conn -> bool -> unit = "hipd_ml_profile"
external session_profile_ : conn -> bool -> Info.t = "hipd_ml_session_profile"

let profile_enable c = profile c true
let profile_disable c = profile c false
let session_profile c ?(clear = false) () = session_profile_ c clear

(* ------------------------------------------------------------- kernels *)

type arg =
  | Buffer of buffer * int
  | Ptr of int64
  | I32 of int32
  | I64 of int64
  | F32 of float
  | F64 of float

type dims3 = int * int * int

external kernel_compile_ :
  conn -> int option -> string -> string -> string list -> bool -> kernel * Info.t
  = "hipd_ml_kernel_compile_bc" "hipd_ml_kernel_compile"

let kernel_compile c ?device ?(options = []) ~name source =
  fst (kernel_compile_ c device source name options false)

let kernel_compile_cached c ?device ?(options = []) ~name source =
  fst (kernel_compile_ c device source name options true)

let kernel_destroy = handle_free

external kernel_launch_ :
  conn -> kernel -> dims3 -> dims3 -> int -> stream option -> arg array -> bool -> unit
  = "hipd_ml_kernel_launch_bc" "hipd_ml_kernel_launch"

let kernel_launch c k ~grid ~block ?(shared_mem = 0) ?stream args =
  kernel_launch_ c k grid block shared_mem stream args false

let kernel_run c k ~grid ~block ?(shared_mem = 0) ?stream args =
  kernel_launch_ c k grid block shared_mem stream args true

external kernel_output_ : conn -> Info.t = "hipd_ml_kernel_output"

let kernel_output c = Info.string (kernel_output_ c) "output"

external generate_source_ :
  conn -> int option -> string option -> string -> dims3 option -> string list -> Info.t
  = "hipd_ml_generate_source_bc" "hipd_ml_generate_source"

let generate_source c ?device ?arch ?block ?(soa_params = []) ir =
  generate_source_ c device arch ir block soa_params

external compile_ir_ :
  conn -> int option -> string -> dims3 option -> string list -> string list ->
  kernel * Info.t = "hipd_ml_compile_ir_bc" "hipd_ml_compile_ir"

let kernel_compile_ir c ?device ?block ?(soa_params = []) ?(options = []) ir =
  compile_ir_ c device ir block soa_params options

external run_source_ :
  conn -> string -> string -> string -> dims3 -> dims3 -> int -> arg array -> bool -> unit
  = "hipd_ml_run_source_bc" "hipd_ml_run_source"

let run_source c ~source ~lang ~kernel_name ~grid ~block ?(shared_mem = 0)
    ?(wait = true) args =
  run_source_ c source lang kernel_name grid block shared_mem args wait

external supported_source_langs_ : conn -> int option -> Info.t
  = "hipd_ml_supported_source_langs"

let strings_of_info i =
  List.init (Info.length i "") (fun k -> Info.string i (string_of_int k))

let supported_source_langs c ?device () = strings_of_info (supported_source_langs_ c device)

external execute_direct : conn -> unit = "hipd_ml_execute_direct"
external cache_clear : conn -> unit = "hipd_ml_cache_clear"
external cache_stats : conn -> Info.t = "hipd_ml_cache_stats"

(* ---------------------------------------------------------- intrinsics *)

type convergence = Uniform | Divergent | Sync

type intrinsic = {
  name : string;
  code : string;
  arity : int option;
  convergence : convergence;
  builtin : bool;
}

external intrinsics_list_ : conn -> int option -> Info.t = "hipd_ml_intrinsics_list"
external intrinsics_find_ : conn -> string -> int option -> Info.t = "hipd_ml_intrinsics_find"

external intrinsics_register_ : conn -> string -> string -> convergence -> int -> unit
  = "hipd_ml_intrinsics_register"

let intrinsics_of_info i =
  List.init (Info.length i "") (fun k ->
      let f s = Printf.sprintf "%d.%s" k s in
      {
        name = Info.string i (f "name");
        code = Info.string i (f "code");
        arity = (match Info.int i (f "arity") with n -> Some n | exception Error _ -> None);
        convergence =
          (match Info.string i (f "convergence") with
          | "divergent" -> Divergent
          | "sync" -> Sync
          | _ -> Uniform);
        builtin = Info.bool i (f "builtin");
      })

let intrinsics_list c ?device () = intrinsics_of_info (intrinsics_list_ c device)
let intrinsics_find c ?device name = intrinsics_of_info (intrinsics_find_ c name device)

let intrinsics_register c ~name ~code ~convergence ~arity =
  intrinsics_register_ c name code convergence arity
