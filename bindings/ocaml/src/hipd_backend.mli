(* SPDX-License-Identifier: MIT *)
(** hipd as a Sarek backend: the shape of SPOC's [Hip_plugin.Backend]
    ([Framework_sig.BACKEND]) over a hipd connection.

    The top level of this module is the backend on the default connection
    (opened on first use from [$HIPD_SOCKET], else libhipd's default
    socket; {!set_connection} picks another); {!Make} builds one on any
    connection, so that a program can hold several at once.

    Where hipd differs from upstream's HIP backend (PROTOCOL.md, "For Sarek
    backends"):
    - every failure raises [Hipd.Error (code, message)] with hipd's code
      and message, including an unsupported language in {!S.run_source}
      ([ELANG]; upstream raises [Failure]);
    - [Memory.size] counts elements, as upstream's does;
    - the raw-pointer transfers take the address as a [nativeint] (a
      Ctypes pointer's [raw_address_of_ptr]) instead of a Ctypes pointer,
      so that the binding does not depend on ctypes;
    - [alloc_zero_copy] returns [Some] for a Bigarray made by
      [Memory.host_array] (memory the daemon maps too) and [None] for any
      other, which the daemon cannot reach;
    - [generate_source] honours [soa_params]: hipd lowers records to
      Structure-of-Arrays itself, so it need not refuse them. *)

open Hipd_framework

module type S = sig
  val name : string
  val version : int * int * int
  val is_available : unit -> bool
  val execution_model : execution_model

  val connection : unit -> Hipd.conn
  (** The connection this backend talks on. *)

  module Device : sig
    type t
    type id = int

    val init : unit -> unit
    (** Connect (if not yet) and read the devices. *)

    val count : unit -> int
    val get : int -> t
    val id : t -> id
    val name : t -> string
    val capabilities : t -> capabilities
    val arch : t -> string
    (** ["host-x86_64"], ["gfx90a"], ["sm_90"]. *)

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
    (** [alloc dev n kind]: [n] elements. *)

    val alloc_custom : Device.t -> size:int -> elem_size:int -> 'a buffer
    (** [size] elements of [elem_size] bytes (a record type's). *)

    val host_array :
      Device.t -> ('a, 'b) Bigarray.kind -> int -> ('a, 'b, Bigarray.c_layout) Bigarray.Array1.t
    (** A zeroed Bigarray in memory the daemon maps too ([Hipd.Shm]):
        transfers from and to it copy nothing, and {!alloc_zero_copy}
        takes it. *)

    val alloc_zero_copy :
      Device.t -> ('a, 'b, Bigarray.c_layout) Bigarray.Array1.t ->
      ('a, 'b) Bigarray.kind -> 'a buffer option
    (** A buffer that is the host array itself: [Some] for a
        {!host_array} (on a device that can map it), [None] otherwise. *)

    val free : 'a buffer -> unit

    val host_to_device : src:('a, 'b, Bigarray.c_layout) Bigarray.Array1.t -> dst:'a buffer -> unit
    val device_to_host : src:'a buffer -> dst:('a, 'b, Bigarray.c_layout) Bigarray.Array1.t -> unit
    val host_ptr_to_device : src_ptr:nativeint -> byte_size:int -> dst:'a buffer -> unit
    val device_to_host_ptr : src:'a buffer -> dst_ptr:nativeint -> byte_size:int -> unit
    val device_to_device : src:'a buffer -> dst:'a buffer -> unit
    val size : 'a buffer -> int
    (** Elements. *)

    val device_ptr : 'a buffer -> nativeint
    val is_zero_copy : 'a buffer -> bool
    val handle : 'a buffer -> Hipd.buffer
  end

  module Event : sig
    type t = Hipd.event

    val create : unit -> t
    (** On the current device. *)

    val destroy : t -> unit
    val record : t -> Stream.t -> unit
    val synchronize : t -> unit
    val elapsed : start:t -> stop:t -> float
    (** Milliseconds. *)
  end

  module Kernel : sig
    type t
    type args

    val compile : Device.t -> name:string -> source:string -> t
    (** HIP C++ source. A compile error is [Hipd.Error (ECOMPILE, log)]. *)

    val compile_cached : Device.t -> name:string -> source:string -> t
    (** Through hipd's cache, and kept here: the same device, name and
        source give the same kernel until {!clear_cache}. *)

    val clear_cache : unit -> unit
    (** Forget the kernels kept here, and empty hipd's shared cache when
        this user may (root or the daemon's user; it is shared by every
        client, so others may not). *)

    val compile_ir :
      Device.t -> ?block:dims -> ?soa_params:string list -> Hipd_ir.kernel -> t
    (** Generate, compile and load a kernel from its IR; its launches are
        checked against the generated parameter list. *)

    val arguments : t -> (string * string) list
    (** A kernel from IR: its launch arguments in order, (C name, kind:
        ["buffer"], ["i32"], ...); [[]] for one from source. *)

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
    (** [stream] [None]: the default stream of the kernel's device. An
        argument position left unset is [Hipd.Error (EINVAL, _)]. *)
  end

  val enable_profiling : unit -> unit
  val disable_profiling : unit -> unit

  val generate_source :
    ?block:dims -> ?soa_params:string list -> Hipd_ir.kernel -> string option
  (** The HIP source hipd generates for the current device ([Some] always:
      errors raise). *)

  val execute_direct :
    native_fn:(block:dims -> grid:dims -> exec_arg array -> unit) option ->
    ir:Hipd_ir.kernel option -> block:dims -> grid:dims -> exec_arg array -> unit
  (** Refused, as a JIT backend must: [Hipd.Error (ENOTSUP, _)]. *)

  type intrinsic = {
    intr_name : string;
    intr_code : string;  (** a C expression, [%s] for each argument *)
    intr_convergence : convergence;
    intr_arity : int;  (** -1: any *)
  }

  module Intrinsics : INTRINSIC_REGISTRY with type intrinsic_impl = intrinsic
  (** hipd's registry: [register] is for this connection's kernels;
      [find] and [list_all] see the built-ins too. *)

  val supported_source_langs : source_lang list
  (** [[CUDA_Source]]: every hipd device takes CUDA (and HIP) source
      (PROTOCOL.md, [supported_source_langs]). *)

  val source_langs : unit -> string list
  (** The daemon's own list for the current device (["hip"; "cuda"]). *)

  val run_source :
    source:string -> lang:source_lang -> kernel_name:string -> block:dims ->
    grid:dims -> shared_mem:int -> run_source_arg list -> unit
  (** Compile through the cache, launch on the current device's default
      stream and wait. *)

  val wrap_kargs : Kernel.args -> kargs
  val unwrap_kargs : kargs -> Kernel.args option
end

module type CONNECTION = sig
  val connection : unit -> Hipd.conn
end

module Make (C : CONNECTION) : S

val set_connection : Hipd.conn -> unit
(** Use this connection for the default backend below. *)

include S
