(* SPDX-License-Identifier: MIT *)
(* bindings/ocaml/config/discover.ml: the C flags of the stubs and the
   link flags of libhipd, written as the two sexp files src/dune includes.

   - HIPD_BUILDDIR (and HIPD_SRCDIR, default: three levels above this
     file's directory): a hipd build tree; the headers come from the
     source and build trees, libhipd from BUILDDIR/.libs (libtool's
     directory), with an rpath so that tests run against it, never an
     installed libhipd.
   - HIPD_LIBDIR and HIPD_INCLUDEDIR: an installed libhipd (make install
     sets them to its own libdir and includedir).
   - neither: pkg-config hipd, else plain -lhipd. *)

let getenv v = match Sys.getenv_opt v with Some "" | None -> None | s -> s

let pkg_config args =
  let ic = Unix.open_process_in ("pkg-config " ^ args ^ " hipd 2>/dev/null") in
  let line = try input_line ic with End_of_file -> "" in
  match Unix.close_process_in ic with
  | Unix.WEXITED 0 -> Some (String.split_on_char ' ' line |> List.filter (( <> ) ""))
  | _ -> None

let () =
  let cflags, libs =
    match getenv "HIPD_BUILDDIR", getenv "HIPD_LIBDIR" with
    | Some build, _ ->
        let src = Option.value (getenv "HIPD_SRCDIR") ~default:build in
        let lib = Filename.concat build ".libs" in
        ( [ "-I" ^ Filename.concat src "client"; "-I" ^ Filename.concat build "client" ],
          [ "-L" ^ lib; "-Wl,-rpath," ^ lib; "-lhipd" ] )
    | None, Some libdir ->
        let inc = match getenv "HIPD_INCLUDEDIR" with Some d -> [ "-I" ^ d ] | None -> [] in
        (inc, [ "-L" ^ libdir; "-Wl,-rpath," ^ libdir; "-lhipd" ])
    | None, None -> (
        match pkg_config "--cflags", pkg_config "--libs" with
        | Some c, Some l -> (c, l)
        | _ -> ([], [ "-lhipd" ]))
  in
  let write file l =
    let oc = open_out file in
    output_string oc ("(" ^ String.concat " " (List.map (Printf.sprintf "%S") l) ^ ")\n");
    close_out oc
  in
  write "c_flags.sexp" ("-Wall" :: "-O2" :: cflags);
  write "c_library_flags.sexp" ("-lpthread" :: libs)
