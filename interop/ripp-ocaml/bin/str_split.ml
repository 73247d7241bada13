(* The index of the first occurrence of [sub] in [s] (the stdlib has none). *)
let find s sub =
  let n = String.length s and m = String.length sub in
  let rec go i = if i + m > n then None else if String.sub s i m = sub then Some i else go (i + 1) in
  go 0
