module {}
#-}