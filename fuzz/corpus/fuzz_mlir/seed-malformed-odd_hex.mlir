module {}
{-#
  dialect_resources: {
    builtin: {
      b: "0x040000000"
    }
  }
#-}