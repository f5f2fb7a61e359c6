(* SPDX-License-Identifier: MIT *)
(* bindings/ocaml/config/discover.ml: the C flags of the stubs and the
   link flags of libhipd, written as the two sexp files src/dune includes.

   Headers: HIPD_BUILDDIR (a hipd build tree, whose client/ holds the
   generated hipd_version.h) with HIPD_SRCDIR (its source tree, default
   the same), else HIPD_INCLUDEDIR, else pkg-config hipd.
   Library: HIPD_LIBDIR (an installed libhipd: make install sets it to its
   libdir), else HIPD_BUILDDIR/.libs (libtool's directory in the build
   tree, so that tests run against it, never an installed libhipd), else
   pkg-config hipd, else plain -lhipd. Either directory goes in as an rpath
   too, so that programs find the libhipd they were linked with, unless
   the loader searches it anyway. *)

let getenv v = match Sys.getenv_opt v with Some "" | None -> None | s -> s

let pkg_config args =
  let ic = Unix.open_process_in ("pkg-config " ^ args ^ " hipd 2>/dev/null") in
  let line = try input_line ic with End_of_file -> "" in
  match Unix.close_process_in ic with
  | Unix.WEXITED 0 -> Some (String.split_on_char ' ' line |> List.filter (( <> ) ""))
  | _ -> None

let () =
  let build = getenv "HIPD_BUILDDIR" in
  let cflags =
    match build, getenv "HIPD_INCLUDEDIR" with
    | Some b, _ ->
        let src = Option.value (getenv "HIPD_SRCDIR") ~default:b in
        [ "-I" ^ Filename.concat src "client"; "-I" ^ Filename.concat b "client" ]
    | None, Some d -> [ "-I" ^ d ]
    | None, None -> Option.value (pkg_config "--cflags") ~default:[]
  in
  let libs =
    (* No rpath to a directory the loader searches anyway (/usr/lib and
       its multiarch directory, where Debian installs libhipd): a needless
       one is a packaging error (lintian custom-library-search-path). *)
    let system d =
      let d = if String.length d > 1 && d.[String.length d - 1] = '/'
        then String.sub d 0 (String.length d - 1) else d in
      let under p =
        let n = String.length p in
        String.length d > n && String.sub d 0 n = p
        && not (String.contains (String.sub d n (String.length d - n)) '/')
      in
      List.mem d [ "/lib"; "/usr/lib"; "/lib64"; "/usr/lib64" ]
      || under "/usr/lib/" || under "/lib/"
    in
    let dir d =
      (* Nor a -L, which ocamlmklib turns into an rpath of the stubs. *)
      if system d then [ "-lhipd" ] else [ "-L" ^ d; "-Wl,-rpath," ^ d; "-lhipd" ]
    in
    match getenv "HIPD_LIBDIR", build with
    | Some d, _ -> dir d
    | None, Some b -> dir (Filename.concat b ".libs")
    | None, None -> Option.value (pkg_config "--libs") ~default:[ "-lhipd" ]
  in
  let write file l =
    let oc = open_out file in
    output_string oc ("(" ^ String.concat " " (List.map (Printf.sprintf "%S") l) ^ ")\n");
    close_out oc
  in
  write "c_flags.sexp" ("-Wall" :: "-O2" :: cflags);
  write "c_library_flags.sexp" ("-lpthread" :: libs)
