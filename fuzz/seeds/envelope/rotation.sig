{
  "payload": "eyJ3b3Jrc3BhY2UiOiJ3cy1maXJzdCIsInZlcnNpb24iOiJmaXJzdC0xIiwic2hhMjU2IjoiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYmFiYWJhYiIsImtleXNfc2hhMjU2IjoiNTBmYjY3YjQ1NjU4MDI5ODZkOTFjMTNkMmJiYzNkMTkxNDQyMTY0MzNmM2Y4NDU2MGEwM2MyYzExNGUzZDc3MSIsInJldmlzaW9uIjozLCJzaWduZWRfYXQiOiIyMDI3LTAxLTE1VDA4OjAwOjAwLjAwMFoiLCJleHBpcmVzX2F0IjoiMjAyNy0wMS0yMlQwODowMDowMC4wMDBaIn0=",
  "payloadType": "application/vnd.portfolio-replica.version+json",
  "signatures": [
    {
      "keyid": "5c29b78f10a35a49",
      "sig": "yuywCWGXPgdg9en9r73iS4Ve2wmpAoLfMwe7hQjhFeq0Q9FqHV5JlTTnmDelrJhZAZUAFMNvM6wAEtrYjZwnBw=="
    },
    {
      "keyid": "fe812c12f3ab4ce6",
      "sig": "om/iR85L2LULVdGt4g0ZtrFoyGTqM5mcREMQ28pszXYLHokWCLP58Sd+c6NHEobxEmjQy0ZTsuLmKH2+OZk7AA=="
    }
  ]
}
