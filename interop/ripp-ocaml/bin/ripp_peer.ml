(* ripp_peer: an independent RIPP peer on the real bin_prot library.

     ripp_peer roundtrip FILE.json...      vectors against bin_prot (Roundtrip)
     ripp_peer decode                      TYPE<TAB>HEX lines in, bin_prot's verdicts out
     ripp_peer consume --schemas FILE [--host H] [--port N] [--worker-id ID]
                       [--heartbeat-interval S] [--ready-file PATH]
     ripp_peer produce --schemas FILE --peer-host H --peer-port N --source-id ID
                       (--deltas FILE | --count N) [--checkpoint] [--stay S] [--timeout S]

   The command line, output lines and exit codes are those of the reference
   node (python -m reference_impl.ripp, its __main__.py): "RIPP_READY
   port=N", then "RIPP_<WHAT> {json}" lines; exit 0 done, 1 connection or
   protocol error, 2 bad arguments, 5 timeout, 6 schemas refused. Logs go to
   stderr. The I/O is a single-threaded select loop over non-blocking
   sockets: every wait is bounded by the sessions' next deadline. *)

module J = Yojson.Basic
module T = Types

external monotonic_ns_raw : unit -> int64 = "ripp_monotonic_ns"

let now () = Int64.to_int (monotonic_ns_raw ())
let wall_ns () = Int64.of_float (Unix.gettimeofday () *. 1e9)
let exit_ok, exit_error, exit_usage, exit_timeout, exit_rejected = (0, 1, 2, 5, 6)
let read_chunk = 65536
let max_connections = 256
let max_file_bytes = 16 lsl 20
let max_pending = 1 lsl 20

exception Usage of string

let usage fmt = Printf.ksprintf (fun s -> raise (Usage s)) fmt
let verbose = ref false
let log fmt = Printf.ksprintf (fun s -> if !verbose then prerr_endline ("ripp_peer: " ^ s)) fmt

let print_event ?peer ((name, fields) : Session.event) =
  let fields = match peer with Some p -> ("peer", `String p) :: fields | None -> fields in
  print_string ("RIPP_" ^ name ^ " " ^ J.to_string (`Assoc fields) ^ "\n");
  flush stdout

let read_file path =
  let ic = try open_in_bin path with Sys_error m -> usage "%s" m in
  Fun.protect ~finally:(fun () -> close_in ic) (fun () ->
      let n = in_channel_length ic in
      if n > max_file_bytes then usage "%s is over %d bytes" path max_file_bytes;
      really_input_string ic n)

let load_registry path =
  match Codec.registry_of_json (J.from_string (read_file path)) with
  | [] -> usage "--schemas %s: a registry file maps output names to schemas" path
  | r -> r
  | exception (Yojson.Json_error m | Invalid_argument m | Failure m) -> usage "--schemas %s: %s" path m
  | exception Yojson.Basic.Util.Type_error (m, _) -> usage "--schemas %s: %s" path m

(* --- deltas to send ----------------------------------------------------- *)

type spec = { output : string; key : string; delta : T.Delta.t; sequence_no : int option }

(* The text: "key : string (* bin_prot encoded key *)": a symbol, as a
   bin_prot string (as the reference node encodes --deltas keys). *)
let key_bytes text = Codec.to_string Bin_prot.Std.bin_writer_string text

(* --deltas FILE: [{"output", "key", "op": "set"|"patch"|"remove",
   "fields": {"<field>": "<hex of the bin_prot value>"}, "sequence_no"?}] *)
let load_deltas path =
  let open Yojson.Basic.Util in
  try
    J.from_string (read_file path) |> to_list
    |> List.map (fun item ->
           let fields =
             match member "fields" item with
             | `Null -> []
             | `Assoc kv -> List.map (fun (f, v) -> { T.Delta.field = f; value = Codec.unhex (to_string v) }) kv
             | _ -> usage "--deltas %s: fields must be an object" path
           in
           let delta =
             match member "op" item with
             | `Null | `String "set" -> T.Delta.Set fields
             | `String "patch" -> T.Delta.Patch fields
             | `String "remove" -> T.Delta.Remove
             | _ -> usage "--deltas %s: op must be set, patch or remove" path
           in
           {
             output = to_string (member "output" item);
             key = key_bytes (to_string (member "key" item));
             delta;
             sequence_no = to_int_option (member "sequence_no" item);
           })
  with
  | Yojson.Json_error m | Invalid_argument m | Failure m -> usage "--deltas %s: %s" path m
  | Type_error (m, _) -> usage "--deltas %s: %s" path m

(* A value of a field type for generated delta number i, written by
   bin_prot's own writers: the reference node's sample_value (int i, int64
   i*1000, float i/4, bool (i odd), string "v<i>", Some _, [_]), so both
   peers generate the same state. *)
type v = I of int | I64 of int64 | F of float | B of bool | S of string | O of v option | L of v list

let v_writer : v Bin_prot.Type_class.writer =
  let open Bin_prot.Std in
  let rec size = function
    | I i -> bin_size_int i
    | I64 i -> bin_size_int64 i
    | F f -> bin_size_float f
    | B b -> bin_size_bool b
    | S s -> bin_size_string s
    | O o -> bin_size_option size o
    | L l -> bin_size_list size l
  in
  let rec write buf ~pos = function
    | I i -> bin_write_int buf ~pos i
    | I64 i -> bin_write_int64 buf ~pos i
    | F f -> bin_write_float buf ~pos f
    | B b -> bin_write_bool buf ~pos b
    | S s -> bin_write_string buf ~pos s
    | O o -> bin_write_option write buf ~pos o
    | L l -> bin_write_list write buf ~pos l
  in
  { size; write }

let rec sample (t : T.Schema.field_type) i =
  match t with
  | Int -> I i
  | Int64 -> I64 (Int64.of_int (i * 1000))
  | Float -> F (float_of_int i /. 4.)
  | Bool -> B (i mod 2 = 1)
  | String -> S (Printf.sprintf "v%d" i)
  | Option t -> O (Some (sample t i))
  | List t -> L [ sample t i ]

let sample_value t i = Codec.to_string v_writer (sample t i)

(* --count N: the reference node's generated_deltas: N deltas for the first
   output, Set on keys K0..K3 in turn, every 5th a Patch of the first
   field, every 7th a Remove. *)
let generated_deltas outputs count =
  match outputs with
  | [] -> []
  | (name, (schema : T.Schema.t)) :: _ ->
      List.init count (fun j ->
          let i = j + 1 in
          let key = key_bytes (Printf.sprintf "K%d" (i mod 4)) in
          let fv (f : T.Schema.field) = { T.Delta.field = f.field_name; value = sample_value f.field_type i } in
          let delta =
            if i mod 7 = 0 then T.Delta.Remove
            else if i mod 5 = 0 && schema.fields <> [] then T.Delta.Patch [ fv (List.hd schema.fields) ]
            else T.Delta.Set (List.map fv schema.fields)
          in
          { output = name; key; delta; sequence_no = None })

(* --- sockets ------------------------------------------------------------ *)

type conn = { fd : Unix.file_descr; peer : string; mutable pending : string; mutable gone : bool }

let flush_conn c =
  let rec go () =
    if c.pending <> "" && not c.gone then
      match Unix.single_write_substring c.fd c.pending 0 (String.length c.pending) with
      | n ->
          c.pending <- String.sub c.pending n (String.length c.pending - n);
          go ()
      | exception Unix.Unix_error ((Unix.EAGAIN | Unix.EWOULDBLOCK | Unix.EINTR), _, _) -> ()
      | exception Unix.Unix_error (e, _, _) ->
          log "write to %s: %s" c.peer (Unix.error_message e);
          c.gone <- true
  in
  go ()

(* Read what is there: Some "" at EOF, None when nothing yet. *)
let read_conn c =
  let b = Bytes.create read_chunk in
  match Unix.read c.fd b 0 read_chunk with
  | n -> Some (Bytes.sub_string b 0 n)
  | exception Unix.Unix_error ((Unix.EAGAIN | Unix.EWOULDBLOCK | Unix.EINTR), _, _) -> None
  | exception Unix.Unix_error (_, _, _) -> Some ""

let select_wait reads writes timeout_s =
  match Unix.select reads writes [] (Float.max 0. timeout_s) with
  | r, w, _ -> (r, w)
  | exception Unix.Unix_error (Unix.EINTR, _, _) -> ([], [])

let addr_string = function
  | Unix.ADDR_INET (a, p) -> Printf.sprintf "%s:%d" (Unix.string_of_inet_addr a) p
  | Unix.ADDR_UNIX s -> s

let resolve host =
  match Unix.inet_addr_of_string host with
  | a -> a
  | exception Failure _ -> (
      match Unix.gethostbyname host with
      | h when Array.length h.h_addr_list > 0 -> h.h_addr_list.(0)
      | _ -> usage "cannot resolve %s" host
      | exception Not_found -> usage "cannot resolve %s" host)

(* --- consume ------------------------------------------------------------ *)

let stop = ref false

let write_ready_file path host port =
  let tmp = Printf.sprintf "%s.tmp%d" path (Unix.getpid ()) in
  let oc = open_out tmp in
  output_string oc (J.to_string (`Assoc [ ("host", `String host); ("port", `Int port) ]) ^ "\n");
  close_out oc;
  Sys.rename tmp path

(* After a session closes, what it queued (a Schema_negotiation with
   ok = false) gets this long to be written before the socket closes. *)
let linger_ns = 2_000_000_000

let consume ~host ~port ~schemas ~worker_id ~heartbeat_ms ~ready_file =
  let registry = load_registry schemas in
  let addr = resolve host in
  let lsock = Unix.socket (Unix.domain_of_sockaddr (Unix.ADDR_INET (addr, port))) Unix.SOCK_STREAM 0 in
  Unix.setsockopt lsock Unix.SO_REUSEADDR true;
  (try Unix.bind lsock (Unix.ADDR_INET (addr, port))
   with Unix.Unix_error (e, _, _) -> usage "cannot listen on %s:%d: %s" host port (Unix.error_message e));
  Unix.listen lsock 64;
  Unix.set_nonblock lsock;
  let bound_port = match Unix.getsockname lsock with Unix.ADDR_INET (_, p) -> p | _ -> port in
  (match ready_file with Some p -> write_ready_file p host bound_port | None -> ());
  Printf.printf "RIPP_READY port=%d\n%!" bound_port;
  let conns : (conn * Session.consumer * int option ref) list ref = ref [] in
  (* the int option ref: when a closed session's socket must close at the latest *)
  let handle_events c evs = List.iter (print_event ~peer:c.peer) evs in
  while not !stop do
    let t = now () in
    let deadlines =
      List.filter_map
        (fun (_, s, linger) -> match !linger with Some l -> Some l | None -> Session.consumer_deadline s)
        !conns
    in
    let wait = List.fold_left (fun acc d -> Float.min acc (float_of_int (d - t) /. 1e9)) 1.0 deadlines in
    (* Backpressure: a producer that does not read its answers (acks) is
       not read either once max_pending bytes wait for it, so memory per
       connection stays bounded. *)
    let reads =
      lsock
      :: List.filter_map
           (fun (c, s, _) ->
             if s.Session.cb.closed = None && String.length c.pending < max_pending then Some c.fd else None)
           !conns
    in
    let writes = List.filter_map (fun (c, _, _) -> if c.pending <> "" then Some c.fd else None) !conns in
    let readable, _ = select_wait reads writes wait in
    if List.mem lsock readable then begin
      let rec accept_all () =
        match Unix.accept ~cloexec:true lsock with
        | fd, a ->
            Unix.set_nonblock fd;
            if List.length !conns >= max_connections then Unix.close fd
            else begin
              let c = { fd; peer = addr_string a; pending = ""; gone = false } in
              let s =
                Session.consumer ~worker_id ~registry ~heartbeat_ms ~max_payload:Envelope.max_payload ~wall_ns ~now:(now ())
              in
              log "connection from %s" c.peer;
              conns := !conns @ [ (c, s, ref None) ]
            end;
            accept_all ()
        | exception Unix.Unix_error ((Unix.EAGAIN | Unix.EWOULDBLOCK | Unix.EINTR | Unix.ECONNABORTED), _, _) -> ()
      in
      accept_all ()
    end;
    List.iter
      (fun (c, s, linger) ->
        if s.Session.cb.closed = None && List.mem c.fd readable then begin
          match read_conn c with
          | Some "" -> handle_events c (Session.eof s.cb)
          | Some data -> handle_events c (Session.consumer_receive s data (now ()))
          | None -> ()
        end;
        handle_events c (Session.consumer_poll s (now ()));
        c.pending <- c.pending ^ Session.take_output s.cb;
        flush_conn c;
        if s.cb.closed <> None && !linger = None then linger := Some (now () + linger_ns))
      !conns;
    let t = now () in
    conns :=
      List.filter
        (fun (c, s, linger) ->
          let finished =
            c.gone
            || (s.Session.cb.closed <> None && (c.pending = "" || match !linger with Some l -> t >= l | None -> false))
          in
          if finished then (try Unix.close c.fd with Unix.Unix_error _ -> ());
          not finished)
        !conns
  done;
  List.iter (fun (c, _, _) -> try Unix.close c.fd with Unix.Unix_error _ -> ()) !conns;
  Unix.close lsock;
  exit_ok

(* --- produce ------------------------------------------------------------ *)

exception Failed of int * string

let connect ~host ~port ~timeout_ns =
  let addr = resolve host in
  let sa = Unix.ADDR_INET (addr, port) in
  let fd = Unix.socket ~cloexec:true (Unix.domain_of_sockaddr sa) Unix.SOCK_STREAM 0 in
  Unix.set_nonblock fd;
  let fail e = Unix.close fd; raise (Failed (exit_error, Printf.sprintf "could not connect to %s:%d: %s" host port e)) in
  (match Unix.connect fd sa with
  | () -> ()
  | exception Unix.Unix_error ((Unix.EINPROGRESS | Unix.EWOULDBLOCK | Unix.EAGAIN), _, _) -> (
      let deadline = now () + timeout_ns in
      let rec wait () =
        let left = float_of_int (deadline - now ()) /. 1e9 in
        if left <= 0. then (
          Unix.close fd;
          raise (Failed (exit_timeout, Printf.sprintf "could not connect to %s:%d within %g s" host port (float_of_int timeout_ns /. 1e9))));
        match select_wait [] [ fd ] left with _, [] -> wait () | _ -> ()
      in
      wait ();
      match Unix.getsockopt_error fd with None -> () | Some e -> fail (Unix.error_message e))
  | exception Unix.Unix_error (e, _, _) -> fail (Unix.error_message e));
  { fd; peer = Printf.sprintf "%s:%d" host port; pending = ""; gone = false }

(* Move bytes until the session closes, the peer hangs up, [until ()]
   holds or [deadline] (monotonic ns) passes. *)
let pump c (p : Session.producer) ?(until = fun () -> false) ?deadline () =
  let emit = List.iter (fun e -> print_event e) in
  let finished () =
    p.pb.closed <> None || until () || c.gone || match deadline with Some d -> now () >= d | None -> false
  in
  c.pending <- c.pending ^ Session.take_output p.pb;
  flush_conn c;
  while not (finished ()) do
    let t = now () in
    let ds = List.filter_map Fun.id [ Session.producer_deadline p; deadline ] in
    let wait = List.fold_left (fun acc d -> Float.min acc (float_of_int (d - t) /. 1e9)) 1.0 ds in
    let readable, _ = select_wait [ c.fd ] (if c.pending <> "" then [ c.fd ] else []) wait in
    if readable <> [] then begin
      match read_conn c with
      | Some "" -> emit (Session.eof p.pb)
      | Some data -> emit (Session.producer_receive p data (now ()))
      | None -> ()
    end;
    emit (Session.producer_poll p (now ()));
    c.pending <- c.pending ^ Session.take_output p.pb;
    flush_conn c
  done;
  (* What a closing session queued still goes out, within a short bound. *)
  let until_ns = now () + 1_000_000_000 in
  while c.pending <> "" && (not c.gone) && now () < until_ns do
    ignore (select_wait [] [ c.fd ] 0.1);
    flush_conn c
  done

let produce ~peer_host ~peer_port ~schemas ~source_id ~deltas ~count ~checkpoint ~stay ~timeout =
  let outputs = load_registry schemas in
  let specs = match (deltas, count) with Some f, _ -> load_deltas f | None, Some n -> generated_deltas outputs n | None, None -> [] in
  List.iter
    (fun s -> if not (List.mem_assoc s.output outputs) then usage "--deltas: output %S is not in --schemas" s.output)
    specs;
  let timeout_ns = int_of_float (timeout *. 1e9) in
  try
    let c = connect ~host:peer_host ~port:peer_port ~timeout_ns in
    let p =
      Session.producer ~source_id ~outputs ~timeout_ns ~max_payload:Envelope.max_payload ~wall_ns ~now:(now ())
    in
    let fail_closed code what =
      let reason = match p.pb.closed with Some cl -> cl.reason | None -> "connection ended" in
      Unix.close c.fd;
      raise (Failed (code, what ^ ": " ^ reason))
    in
    pump c p ~until:(fun () -> p.pstate = `Open) ();
    if p.pstate <> `Open then begin
      let code =
        match p.pb.closed with
        | Some { kind = "rejected"; _ } -> exit_rejected
        | Some { kind = "timeout"; _ } -> exit_timeout
        | _ -> exit_error
      in
      fail_closed code "no usable Schema_negotiation"
    end;
    let sent = ref 0 in
    List.iter
      (fun s ->
        Session.send_delta p ~output:s.output ~key:s.key ~delta:s.delta ?sequence_no:s.sequence_no ();
        incr sent)
      specs;
    if checkpoint then begin
      Session.request_checkpoint p 1;
      pump c p ~until:(fun () -> p.acks <> []) ~deadline:(now () + timeout_ns) ();
      if p.acks = [] then
        if p.pb.closed = None && not c.gone then begin
          Unix.close c.fd;
          raise (Failed (exit_timeout, Printf.sprintf "no Checkpoint_ack within %g s" timeout))
        end
        else fail_closed exit_error "the consumer closed before its Checkpoint_ack"
    end;
    pump c p ~deadline:(now () + int_of_float (stay *. 1e9)) ();
    (match p.pb.closed with
    | Some cl when cl.kind <> "peer" -> fail_closed exit_error ("the session ended (" ^ cl.kind ^ ")")
    | _ -> ());
    (try Unix.close c.fd with Unix.Unix_error _ -> ());
    print_string (Printf.sprintf "RIPP_DONE %s\n" (J.to_string (`Assoc [ ("sent", `Int !sent); ("heartbeats", `Int p.heartbeats) ])));
    flush stdout;
    exit_ok
  with Failed (code, m) ->
    Printf.eprintf "error: %s\n%!" m;
    code

(* --- command line ------------------------------------------------------- *)

let parse_args name argv specs =
  let rest = ref [] in
  let specs = Arg.align (specs @ [ ("--log-level", Arg.String (fun l -> verbose := l = "DEBUG" || l = "INFO"), "L log level") ]) in
  (try Arg.parse_argv ~current:(ref 0) argv specs (fun a -> rest := a :: !rest) ("ripp_peer " ^ name ^ " [options]")
   with
  | Arg.Bad m -> usage "%s" (List.hd (String.split_on_char '\n' m))
  | Arg.Help m ->
      print_string m;
      exit exit_ok);
  if !rest <> [] then usage "unexpected argument %s" (List.hd (List.rev !rest))

let positive_float name text =
  match float_of_string_opt text with Some f when f > 0. && Float.is_finite f -> f | _ -> usage "%s must be > 0, got %s" name text

let non_negative name text =
  match float_of_string_opt text with Some f when f >= 0. && Float.is_finite f -> f | _ -> usage "%s must be >= 0, got %s" name text

let port_of name text =
  match int_of_string_opt text with Some p when p >= 0 && p <= 65535 -> p | _ -> usage "%s must be a port 0..65535, got %s" name text

let no_faults = ("--fault", Arg.String (fun f -> usage "--fault %s: ripp_peer has no fault injection" f), "F (refused: no faults)")

let main argv =
  Crc32c.self_test ();
  Sys.set_signal Sys.sigpipe Sys.Signal_ignore;
  match Array.to_list argv with
  | _ :: "roundtrip" :: files when files <> [] -> List.fold_left (fun rc f -> max rc (Roundtrip.run f)) 0 files
  | [ _; "decode" ] -> Roundtrip.decode_loop ()
  | _ :: "consume" :: _ ->
      let host = ref "127.0.0.1" and port = ref 0 and schemas = ref "" and worker_id = ref "ocaml-consumer" in
      let interval = ref 5.0 and ready_file = ref None in
      parse_args "consume" (Array.sub argv 1 (Array.length argv - 1))
        [
          ("--host", Arg.Set_string host, "H listen address (default 127.0.0.1)");
          ("--port", Arg.String (fun s -> port := port_of "--port" s), "N port, 0 picks a free one (default)");
          ("--schemas", Arg.Set_string schemas, "FILE registry JSON (reader schemas)");
          ("--schema", Arg.Set_string schemas, "FILE same as --schemas");
          ("--worker-id", Arg.Set_string worker_id, "ID worker id (default ocaml-consumer)");
          ("--heartbeat-interval", Arg.String (fun s -> interval := positive_float "--heartbeat-interval" s), "S interval asked of producers (default 5)");
          ("--ready-file", Arg.String (fun s -> ready_file := Some s), "PATH write {host, port} JSON once listening");
          no_faults;
        ];
      if !schemas = "" then usage "--schemas is required";
      let heartbeat_ms = Float.to_int (Float.round (!interval *. 1000.)) in
      if heartbeat_ms < Codec.heartbeat_min_ms || heartbeat_ms > Codec.heartbeat_max_ms then
        usage "--heartbeat-interval must be within %g..%g s" (float Codec.heartbeat_min_ms /. 1000.) (float Codec.heartbeat_max_ms /. 1000.);
      let on_signal = Sys.Signal_handle (fun _ -> stop := true) in
      Sys.set_signal Sys.sigterm on_signal;
      Sys.set_signal Sys.sigint on_signal;
      consume ~host:!host ~port:!port ~schemas:!schemas ~worker_id:!worker_id ~heartbeat_ms ~ready_file:!ready_file
  | _ :: "produce" :: _ ->
      let peer_host = ref "" and peer_port = ref (-1) and schemas = ref "" and source_id = ref "" in
      let deltas = ref None and count = ref None and checkpoint = ref false and stay = ref 0.0 and timeout = ref 10.0 in
      parse_args "produce" (Array.sub argv 1 (Array.length argv - 1))
        [
          ("--peer-host", Arg.Set_string peer_host, "H consumer host");
          ("--peer-port", Arg.String (fun s -> peer_port := port_of "--peer-port" s), "N consumer port");
          ("--schemas", Arg.Set_string schemas, "FILE registry JSON (declared outputs, in file order)");
          ("--schema", Arg.Set_string schemas, "FILE same as --schemas");
          ("--source-id", Arg.Set_string source_id, "ID source_worker_id of the Handshake");
          ("--deltas", Arg.String (fun s -> deltas := Some s), "FILE JSON list of {output, key, op, fields, sequence_no?}");
          ( "--count",
            Arg.String
              (fun s ->
                match int_of_string_opt s with
                | Some n when n >= 0 && n <= 1_000_000 -> count := Some n
                | _ -> usage "--count must be 0..1000000, got %s" s),
            "N N generated deltas for the first output" );
          ("--checkpoint", Arg.Set checkpoint, " after the deltas, request a checkpoint and print it");
          ("--stay", Arg.String (fun s -> stay := non_negative "--stay" s), "S keep heartbeating S seconds after the deltas");
          ("--timeout", Arg.String (fun s -> timeout := positive_float "--timeout" s), "S deadline to connect, for the negotiation and an ack (default 10)");
          no_faults;
        ];
      if !peer_host = "" || !peer_port < 0 then usage "--peer-host and --peer-port are required";
      if !schemas = "" then usage "--schemas is required";
      if !source_id = "" then usage "--source-id is required";
      (match (!deltas, !count) with
      | None, None -> usage "one of --deltas or --count is required"
      | Some _, Some _ -> usage "--deltas and --count exclude each other"
      | _ -> ());
      produce ~peer_host:!peer_host ~peer_port:!peer_port ~schemas:!schemas ~source_id:!source_id ~deltas:!deltas ~count:!count
        ~checkpoint:!checkpoint ~stay:!stay ~timeout:!timeout
  | _ ->
      prerr_endline "usage: ripp_peer (roundtrip FILE.json... | consume --schemas FILE ... | produce --schemas FILE ...)";
      exit_usage

let () =
  let rc =
    try main Sys.argv with
    | Usage m ->
        Printf.eprintf "error: %s\n%!" m;
        exit_usage
  in
  exit rc
