module {}
{-#
  dialect_resources: {
    builtin: {
      b: "0x04000000g0"
    }
  }
#-}