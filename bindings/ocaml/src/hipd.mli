(* SPDX-License-Identifier: MIT *)
(** OCaml binding of libhipd, the client library of hipd (a GPU execution
    daemon). One function per method of [proto/PROTOCOL.md], as in
    [client/hipd.h]: [mem.alloc] is {!mem_alloc}.

    Every function takes the connection it talks on. A handle (buffer,
    stream, event, kernel) is valid only on the connection that made it:
    used on another one, the daemon answers [EFOREIGN].

    Errors: a failed call raises {!Error} with hipd's code and the daemon's
    message. Bad input is never a crash: what the binding checks itself
    (a negative size, a dimension out of range) raises the same exception
    with the code hipd would give.

    Ownership: handles are released when the GC collects them (the release
    goes to the daemon with the next call on their connection) or at once
    with their free/destroy function; everything a connection made is
    released by the daemon when the connection closes ({!close}, or the
    GC collecting the connection and every handle made on it). *)

(** {1 Errors} *)

(** hipd's error codes ([HIPD_ERRNO_MAP] of [hipd.h]), by their names. *)
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
  | Unknown_code of int  (** a code this binding does not know *)

(** [Error (code, message)]: [message] is the daemon's, as
    [hipd_last_error] gives it ("mem.read: offset 4096 + 8192 bytes
    exceeds buffer of 8192 bytes"). *)
exception Error of code * string

val code_name : code -> string
(** ["EFOREIGN"], as [hipd_err_name]. *)

val code_of_name : string -> code option
val code_to_int : code -> int
(** The wire number (negative). *)

val code_of_int : int -> code
val strerror : code -> string
(** libhipd's description of a code. *)

val c_err_name : int -> string
(** [hipd_err_name] itself, for cross-checking {!code_name}. *)

(** {1 Library} *)

val version : unit -> string
(** The libhipd the program runs with ("0.1.0"). *)

val protocol_version : unit -> int

(** {1 Connections} *)

type conn

val connect : ?path:string -> ?client_name:string -> unit -> conn
(** Connect and say [hello]. [path]: the socket; default [$HIPD_SOCKET],
    else the per-user or system socket ([hipd_connect]). *)

val close : conn -> unit
(** Close the connection: the daemon releases everything made on it. Waits
    for calls in flight on other threads; later calls raise
    [Error (EDISCONNECTED, _)]. Closing twice does nothing. *)

val is_closed : conn -> bool

val set_timeout : conn -> int -> unit
(** Per-call timeout in milliseconds (0: none); a call past it raises
    [ETIMEDOUT]. *)

val with_connection : ?path:string -> (conn -> 'a) -> 'a
(** Connect, run, close (also on an exception). *)

(** {1 Records}

    The structured results of the daemon ([hipd_info_t]), read by dotted
    paths: ["capabilities.warp_size"], ["arguments.0.name"]. A missing
    field raises [Error (ENOENT, _)], one of another type
    [Error (EHANDLETYPE, _)]. *)
module Info : sig
  type t

  val int : t -> string -> int
  val int64 : t -> string -> int64
  val float : t -> string -> float
  val bool : t -> string -> bool
  val string : t -> string -> string
  val length : t -> string -> int
  (** Elements of an array or map field (["" ] for the record itself). *)

  val has : t -> string -> bool
  val to_string : t -> string
  (** JSON-like text of the whole record. *)
end

val hello : conn -> Info.t
val backend_info : conn -> Info.t
val session_info : conn -> Info.t

(** {1 Handles} *)

type buffer
type stream
type event
type kernel

val buffer_id : buffer -> int64
(** The handle as the daemon knows it. *)

val stream_id : stream -> int64
val event_id : event -> int64
val kernel_id : kernel -> int64
val buffer_conn : buffer -> conn
(** The connection the buffer was made on. *)

val stream_conn : stream -> conn
val event_conn : event -> conn
val kernel_conn : kernel -> conn

(** {1 Devices} *)

val device_count : conn -> int
val device_list : conn -> Info.t
val device_get : conn -> ?device:int -> unit -> Info.t
(** The device record ([None]: the current device). *)

val device_set_current : conn -> int -> unit
val device_current : conn -> int
val device_synchronize : conn -> ?device:int -> unit -> unit

(** {1 Streams} *)

val stream_create : conn -> ?device:int -> unit -> stream
val stream_default : conn -> ?device:int -> unit -> stream
(** The session's default stream of the device; never destroyed by the
    binding (the daemon refuses it). *)

val stream_destroy : conn -> stream -> unit
val stream_synchronize : conn -> stream -> unit
val stream_query : conn -> stream -> bool

(** {1 Memory}

    Offsets are in bytes; Bigarray positions ([pos], [len]) in elements of
    the Bigarray. *)

val kind_name : ('a, 'b) Bigarray.kind -> string
(** The [mem.alloc] kind of a Bigarray kind: ["float32"], ["uint8"],
    ["complex64"], ["char"]... ([int] and [nativeint] are ["int64"]). *)

val mem_alloc : conn -> ?device:int -> kind:string -> int -> buffer
(** [mem_alloc c ~kind n]: [n] elements of [kind]. *)

val mem_alloc_custom : conn -> ?device:int -> elem_size:int -> int -> buffer
val mem_free : conn -> buffer -> unit
(** Free now; a later use of the handle is the daemon's [ESTALE]. *)

val mem_size : conn -> buffer -> int
(** Bytes. *)

val mem_info : conn -> buffer -> Info.t
(** [{size, elem_size, count, device, device_ptr, zero_copy}]. *)

val mem_write :
  conn -> buffer -> ?offset:int -> ?pos:int -> ?len:int ->
  ('a, 'b, 'c) Bigarray.Array1.t -> unit
(** Copy (part of) a Bigarray into the buffer at [offset]. A Bigarray made
    by {!Shm.create} on this connection goes through [mem.write_shm]: the
    daemon copies from the shared pages, no byte goes through the socket
    and none is copied here; any other goes inline ([mem.write]). *)

val mem_read :
  conn -> buffer -> ?offset:int -> ?pos:int -> ?len:int ->
  ('a, 'b, 'c) Bigarray.Array1.t -> unit
(** The reverse ([mem.read_shm] or [mem.read]). *)

val mem_write_inline :
  conn -> buffer -> ?offset:int -> ('a, 'b, 'c) Bigarray.Array1.t -> unit
(** [mem.write] whatever the Bigarray is (the bytes through the socket). *)

val mem_read_inline :
  conn -> buffer -> ?offset:int -> ('a, 'b, 'c) Bigarray.Array1.t -> unit

val mem_write_async :
  conn -> buffer -> ?offset:int -> ('a, 'b, 'c) Bigarray.Array1.t -> stream -> unit
(** Ordered on the stream (the shared form for a shared Bigarray). *)

val mem_read_async :
  conn -> buffer -> ?offset:int -> ('a, 'b, 'c) Bigarray.Array1.t -> stream -> unit

val mem_write_ptr : conn -> buffer -> ?offset:int -> nativeint -> int -> unit
(** [mem_write_ptr c b addr n]: [n] bytes at the raw address [addr] (a
    Ctypes pointer's address, {!bigarray_address}). The caller vouches for
    the memory. *)

val mem_read_ptr : conn -> buffer -> ?offset:int -> nativeint -> int -> unit

val bigarray_address : ('a, 'b, 'c) Bigarray.Array1.t -> nativeint
(** The address of a Bigarray's data (valid while the Bigarray lives). *)

val mem_copy :
  conn -> dst:buffer -> ?dst_offset:int -> src:buffer -> ?src_offset:int ->
  int -> unit
(** Device to device, [len] bytes. *)

val mem_memset : conn -> buffer -> ?offset:int -> len:int -> int -> unit

(** {1 Shared memory}

    Bigarrays whose memory the daemon maps too ([shm.create]): transfers
    to and from them move no bytes through the socket and copy nothing in
    this process, and a buffer can be made of one ({!mem_alloc_zero_copy}).
    The mapping lives as long as the Bigarray or any view of it
    ([Array1.sub], slices, reshapes); it is released after the last one is
    collected. *)
module Shm : sig
  val create :
    conn -> ('a, 'b) Bigarray.kind -> int ->
    ('a, 'b, Bigarray.c_layout) Bigarray.Array1.t
  (** [create c kind n]: [n] zeroed elements. [Error (ENOTSUP, _)] where
      the daemon cannot take descriptors. *)

  val is_shared : conn -> ('a, 'b, 'c) Bigarray.Array1.t -> bool
  (** Made by {!create} on this connection (or a view of one). *)
end

val mem_alloc_zero_copy :
  conn -> ?device:int -> ('a, 'b, 'c) Bigarray.Array1.t -> buffer
(** A buffer whose memory is the shared Bigarray itself
    ([mem.alloc_zero_copy]); [Error (ENOTSUP, _)] for any other Bigarray
    or where the device cannot map host memory. *)

(** {1 Events} *)

val event_create : conn -> ?device:int -> unit -> event
val event_destroy : conn -> event -> unit
val event_record : conn -> event -> ?stream:stream -> unit -> unit
(** [None]: the default stream of the event's device. *)

val event_query : conn -> event -> bool
val event_synchronize : conn -> event -> unit
val event_elapsed : conn -> start:event -> stop:event -> float
(** Milliseconds between two completed marks. *)

(** {1 Profiling} *)

val profile_enable : conn -> unit
val profile_disable : conn -> unit
val session_profile : conn -> ?clear:bool -> unit -> Info.t

(** {1 Kernels} *)

(** A launch argument, by position. *)
type arg =
  | Buffer of buffer * int  (** a buffer at a byte offset *)
  | Ptr of int64  (** a device address inside a buffer of the session *)
  | I32 of int32
  | I64 of int64
  | F32 of float
  | F64 of float

type dims3 = int * int * int

val kernel_compile :
  conn -> ?device:int -> ?options:string list -> name:string -> string -> kernel
(** [kernel.compile]: HIP C++ source ([--lang=cuda] in options for CUDA).
    A compile error is [Error (ECOMPILE, log)]. *)

val kernel_compile_cached :
  conn -> ?device:int -> ?options:string list -> name:string -> string -> kernel

val kernel_destroy : conn -> kernel -> unit

val kernel_launch :
  conn -> kernel -> grid:dims3 -> block:dims3 -> ?shared_mem:int ->
  ?stream:stream -> arg array -> unit
(** Queued; errors of the run come from the next synchronisation. *)

val kernel_run :
  conn -> kernel -> grid:dims3 -> block:dims3 -> ?shared_mem:int ->
  ?stream:stream -> arg array -> unit
(** Launch and wait for it (one request). *)

val kernel_output : conn -> string
(** What the session's kernels printed, taken. *)

val generate_source :
  conn -> ?device:int -> ?arch:string -> ?block:dims3 ->
  ?soa_params:string list -> string -> Info.t
(** [kernel.generate_source] of an IR document (msgpack bytes, as
    {!Hipd_ir.encode} makes): [{source, name, platform, arguments}]. *)

val kernel_compile_ir :
  conn -> ?device:int -> ?block:dims3 -> ?soa_params:string list ->
  ?options:string list -> string -> kernel * Info.t

val run_source :
  conn -> source:string -> lang:string -> kernel_name:string -> grid:dims3 ->
  block:dims3 -> ?shared_mem:int -> ?wait:bool -> arg array -> unit
(** Compile through the cache for the current device, launch on its
    default stream, and (unless [wait] is false) wait. *)

val supported_source_langs : conn -> ?device:int -> unit -> string list
val execute_direct : conn -> unit
(** Always raises [Error (ENOTSUP, _)]: hipd is a JIT backend. *)

val cache_clear : conn -> unit
(** Empty the daemon's shared kernel cache (root or the daemon's user;
    [EPERM] otherwise). *)

val cache_stats : conn -> Info.t

(** {1 Intrinsics} *)

type convergence = Uniform | Divergent | Sync

type intrinsic = {
  name : string;
  code : string;  (** the C expression or template *)
  arity : int option;  (** [None]: any *)
  convergence : convergence;
  builtin : bool;
}

val intrinsics_list : conn -> ?device:int -> unit -> intrinsic list
val intrinsics_find : conn -> ?device:int -> string -> intrinsic list
(** The forms of a name; [Error (ENOENT, _)] if none. *)

val intrinsics_register :
  conn -> name:string -> code:string -> convergence:convergence ->
  arity:int -> unit
(** For this session's kernels; [arity] -1 for any. *)
