(* CRC-32C (Castagnoli, polynomial 0x1EDC6F41; reflected 0x82F63B78), the
   table-driven algorithm the RIPP text shows (ripp-wire-protocol.txt,
   "CRC-32C Integrity"). Written here rather than taken from a library because
   Debian packages no OCaml CRC-32C; it is checked against the RFC 3720 value
   at start-up ([self_test]). OCaml's native int is 63 bits on 64-bit hosts,
   so 32-bit values fit without Int32 boxing. *)

let table =
  Array.init 256 (fun n ->
      let c = ref n in
      for _ = 1 to 8 do
        if !c land 1 = 1 then c := (!c lsr 1) lxor 0x82F63B78 else c := !c lsr 1
      done;
      !c)

let update crc (b : Bytes.t) off len =
  let c = ref (crc lxor 0xFFFFFFFF) in
  for i = off to off + len - 1 do
    let byte = Char.code (Bytes.unsafe_get b i) in
    c := (!c lsr 8) lxor Array.unsafe_get table ((!c lxor byte) land 0xFF)
  done;
  !c lxor 0xFFFFFFFF

let bytes b off len = update 0 b off len
let string s = bytes (Bytes.unsafe_of_string s) 0 (String.length s)

(* RFC 3720 B.4 / the specs README: "123456789" -> 0xE3069283. *)
let self_test () =
  if string "123456789" <> 0xE3069283 then failwith "CRC-32C self-test failed"
