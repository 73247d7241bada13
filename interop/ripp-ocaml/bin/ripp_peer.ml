let () = Crc32c.self_test (); print_endline "ok"
