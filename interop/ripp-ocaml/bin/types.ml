(* The payload types of RIPP, copied verbatim from docs/ripp-profile.md (P3),
   the project's profile: the real bin_prot library (ppx_bin_prot) derives
   their codecs, so this peer's payload bytes are bin_prot's, not ours.
   tests/ripp/test_ocaml_roundtrip.py checks this file still matches the
   profile's block. *)

open Bin_prot.Std

module Schema = struct
  (* The type of one field of an output's record. *)
  type field_type =
    | Int                      (* tag 0: OCaml int, bin_prot int *)
    | Int64                    (* tag 1 *)
    | Float                    (* tag 2 *)
    | Bool                     (* tag 3 *)
    | String                   (* tag 4 *)
    | Option of field_type     (* tag 5 *)
    | List of field_type       (* tag 6 *)
  [@@deriving bin_io]

  type field =
    { field_name : string
    ; field_type : field_type
    ; default : string option  (* bin_prot encoding of a value of field_type *)
    }
  [@@deriving bin_io]

  type t =
    { schema_name : string     (* e.g. "vwap" *)
    ; version : int            (* e.g. 2; informative, see P5 *)
    ; fields : field list      (* in record order *)
    }
  [@@deriving bin_io]
end

module Delta = struct
  type field_value =
    { field : string           (* a field_name of the writer schema *)
    ; value : string           (* bin_prot encoding of a value of that field's type *)
    }
  [@@deriving bin_io]

  type t =
    | Set of field_value list    (* tag 0: the entry becomes exactly these fields *)
    | Patch of field_value list  (* tag 1: these fields are replaced, others kept *)
    | Remove                     (* tag 2: the entry is deleted *)
  [@@deriving bin_io]
end

module Handshake = struct            (* message type 0; layout from the text *)
  type t =
    { source_worker_id : string
    ; output_schemas : (string * Schema.t) list
    ; protocol_version : int
    }
  [@@deriving bin_io]
end

module Delta_msg = struct            (* message type 1; layout from the text *)
  type t =
    { source_output : string
    ; key : string                   (* bin_prot encoded key; opaque here *)
    ; delta_bytes : string           (* bin_prot encoding of Delta.t *)
    ; sequence_no : int
    ; watermark_ns : int64 option
    }
  [@@deriving bin_io]
end

module Checkpoint_request = struct   (* message type 2 *)
  type t = { checkpoint_id : int } [@@deriving bin_io]
end

module Checkpoint_ack = struct       (* message type 3 *)
  type source_state =
    { source_output : string
    ; last_sequence_no : int         (* 0 when nothing was applied *)
    ; applied_count : int            (* deltas applied, duplicates not counted *)
    ; state_digest : string          (* 16 raw bytes, P7 *)
    }
  [@@deriving bin_io]

  type t =
    { checkpoint_id : int            (* echoes the request *)
    ; worker_id : string             (* the consumer's worker id *)
    ; sources : source_state list    (* P7 *)
    }
  [@@deriving bin_io]
end

module Heartbeat = struct            (* message type 4; layout from the text *)
  type t =
    { worker_id : string
    ; timestamp_ns : int64
    ; load : float                   (* 0.0 to 1.0 *)
    }
  [@@deriving bin_io]
end

module Schema_negotiation = struct   (* message type 5 *)
  type t =
    { ok : bool
    ; errors : string list           (* empty when ok; P5 *)
    ; protocol_version : int         (* the consumer's: 1 *)
    ; heartbeat_interval_ms : int    (* P8 *)
    ; worker_id : string             (* the consumer's worker id *)
    }
  [@@deriving bin_io]
end
